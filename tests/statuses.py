"""Reading a notification's per-channel outcome through the status API, as a producer."""

from __future__ import annotations

from collections.abc import Callable

UNSETTLED = ("queued", "sending", "retrying")


def statuses(api, notification_id: str) -> dict[str, dict]:
    """{channel: delivery} from GET /v1/notifications/{id}/status."""
    response = api.get(f"/v1/notifications/{notification_id}/status")
    assert response.status_code == 200, response.content
    return {d["channel"]: d for d in response.json()["deliveries"]}


def settled(api, notification_id: str, channels: set[str]) -> Callable[[], dict | None]:
    """A check for wait_for: the deliveries once every one of `channels` is final."""

    def check() -> dict | None:
        found = statuses(api, notification_id)
        if set(found) >= channels and all(found[c]["status"] not in UNSETTLED for c in channels):
            return found
        return None

    return check
