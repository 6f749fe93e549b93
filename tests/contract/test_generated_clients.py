"""Clients generated from /v1/schema, as a product team makes them on its first day.

openapi-python-client (pinned in the dev extra, run with its default settings) and
openapi-typescript (npm, pinned in package.json / package-lock.json) each generate once
per session from the schema the app serves. Each must generate without a warning and
without leaving an operation out; the Python client then makes a typed round trip
against a live server on loopback with the real pipeline behind it. Node and npm are
required: without them this fails, it does not skip.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.test import Client

from tests.processes import ROOT
from tests.waiting import wait_for

BIN = Path(sys.executable).parent
NODE_MODULES = ROOT / "node_modules"
PACKAGE = "notify_api_client"  # openapi-python-client's name for the schema's title
ORDER = {"order_number": "A-1001", "delivery_date": "2026-12-03", "items_count": 2}


@dataclass(frozen=True)
class Generated:
    directory: Path
    output: str


class _Started:
    """A command running in the background; `output` waits for it to succeed."""

    def __init__(self, command: list, *, cwd: Path, what: str) -> None:
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.what = what
        self.process = subprocess.Popen(
            [str(part) for part in command],
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def output(self) -> str:
        """Its output once it exits; a failure quoting it if it failed."""
        output, _ = self.process.communicate(timeout=300)
        if self.process.returncode != 0:
            pytest.fail(f"{self.what} failed ({self.process.returncode}):\n{output}")
        return output


def _node_tools() -> Path:
    """node_modules/.bin as package-lock.json pins it (`npm ci` when the lock changed)."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(
                f"{tool} is missing: install Node.js 20 or later with npm; the client test "
                "generates TypeScript with the openapi-typescript of package-lock.json"
            )
    stamp = NODE_MODULES / ".notify-lock.sha256"
    want = hashlib.sha256((ROOT / "package-lock.json").read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != want:
        _Started(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, what="npm ci").output()
        stamp.write_text(want)
    return NODE_MODULES / ".bin"


@pytest.fixture(scope="session")
def served_schema(tmp_path_factory) -> tuple[Path, dict]:
    """The schema as the app serves it at /v1/schema, saved to a file, and parsed."""
    response = Client().get("/v1/schema", {"format": "json"})
    assert response.status_code == 200
    path = tmp_path_factory.mktemp("schema") / "notify.json"
    path.write_bytes(response.content)
    return path, response.json()


def _operation_ids(schema: dict) -> set[str]:
    return {
        operation["operationId"]
        for item in schema["paths"].values()
        for method, operation in item.items()
        if method in ("get", "put", "post", "patch", "delete")
    }


@pytest.fixture(scope="session")
def generated(served_schema, tmp_path_factory) -> dict[str, Generated]:
    """Both clients, generated side by side (once per session)."""
    path, _ = served_schema
    python, typescript = (tmp_path_factory.mktemp(name) for name in ("python", "typescript"))
    runs = {
        "python": _Started(
            [BIN / "openapi-python-client", "generate", "--path", path],
            cwd=python,
            what="openapi-python-client",
        ),
        "typescript": _Started(
            [_node_tools() / "openapi-typescript", path, "--output", typescript / "notify.ts"],
            cwd=typescript,
            what="openapi-typescript",
        ),
    }
    return {
        "python": Generated(python / "notify-api-client" / PACKAGE, runs["python"].output()),
        "typescript": Generated(typescript, runs["typescript"].output()),
    }


@pytest.fixture(scope="session")
def python_client(generated) -> Generated:
    """The generated Python package, importable for the session."""
    project = str(generated["python"].directory.parent)
    sys.path.insert(0, project)
    yield generated["python"]
    sys.path.remove(project)
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


@pytest.fixture(scope="session")
def typescript_client(generated) -> Generated:
    return generated["typescript"]


# Every operation's id, as the generated clients name their functions: a change here is
# a change to every client.
OPERATION_IDS = {
    "send_notification",
    "send_notification_batch",
    "cancel_notification",
    "get_notification_status",
    "upsert_user",
    "erase_user",
    "register_device",
    "remove_device",
    "list_feed",
    "mark_feed_read",
    "get_unread_count",
    "stream_feed",
    "get_preferences",
    "update_preferences",
    "create_user_token",
    "create_preference_center_link",
    "revoke_preference_center_links",
    "launch_campaign",
    "get_campaign",
    "pause_campaign",
    "resume_campaign",
    "cancel_campaign",
    "list_webhooks",
    "register_webhook",
    "get_webhook",
    "update_webhook",
    "remove_webhook",
    "rotate_webhook_secret",
    "enable_webhook",
    "redeliver_webhook_events",
    "list_categories",
    "get_category",
    "update_category_digests",
    "get_campaign_report",
    "get_deliveries_report",
    "get_user_history",
}


def test_the_schema_states_every_operation_id_as_a_verb(served_schema):
    _, schema = served_schema
    ids = _operation_ids(schema)
    assert ids == OPERATION_IDS
    assert {
        "send_notification",
        "get_notification_status",
        "upsert_user",
        "list_feed",
        "mark_feed_read",
        "get_unread_count",
    } <= ids
    assert not [i for i in ids if re.search(r"_(create|retrieve|update|destroy|list)$", i)]
    # Time zones are a named string format now, not an enum of every zone.
    timezone = schema["components"]["schemas"]["RecipientInRequest"]["properties"]["timezone"]
    assert timezone["type"] == "string" and timezone["format"] == "iana-time-zone"
    assert "enum" not in timezone


def test_openapi_python_client_generates_every_operation_typed_without_warnings(
    python_client, served_schema
):
    _, schema = served_schema
    # Only the banner: any warning (a skipped endpoint, an unparsable schema) adds lines.
    assert python_client.output.strip().splitlines() == [
        f"Generating {python_client.directory.parent}"
    ], python_client.output
    modules = {path.stem for path in (python_client.directory / "api").glob("*/*.py")}
    assert _operation_ids(schema) <= modules
    untyped = [
        f"{path.name}: {line.strip()}"
        for path in (python_client.directory / "models").glob("*.py")
        for line in path.read_text().splitlines()
        if re.match(r"\s+\w+: Any\b", line)
    ]
    assert not untyped, f"fields the generator could not type: {untyped}"


def test_openapi_typescript_generates_every_operation_without_warnings(
    typescript_client, served_schema
):
    _, schema = served_schema
    lines = typescript_client.output.strip().splitlines()
    # The name-and-version banner and the one "schema → file" line; a warning adds lines.
    assert len(lines) == 2 and "notify.ts" in lines[1], typescript_client.output
    types = (typescript_client.directory / "notify.ts").read_text()
    missing = [i for i in _operation_ids(schema) if f'operations["{i}"]' not in types]
    assert not missing


def _operation(tag: str, name: str):
    """The generated client's module for one operation (its `sync`, `asyncio`, ...)."""
    return importlib.import_module(f"{PACKAGE}.api.{tag}.{name}")


@pytest.mark.e2e
def test_the_generated_python_client_makes_a_typed_round_trip(
    python_client, live_server, pipeline, producer_key
):
    client_module = importlib.import_module(PACKAGE)
    models = importlib.import_module(f"{PACKAGE}.models")
    upsert_user, list_feed, mark_feed_read, get_unread_count = (
        _operation("users", name)
        for name in ("upsert_user", "list_feed", "mark_feed_read", "get_unread_count")
    )
    send_notification, get_notification_status = (
        _operation("notifications", name)
        for name in ("send_notification", "get_notification_status")
    )
    client = client_module.AuthenticatedClient(base_url=live_server.url, token=producer_key.key)
    user_id = f"client-{uuid.uuid4().hex[:8]}"

    user = upsert_user.sync(
        client=client,
        user_id=user_id,
        body=models.RecipientInRequest(email="ada@example.com", timezone="Europe/Berlin"),
    )
    assert isinstance(user, models.RecipientOut)
    assert (user.user_id, user.timezone) == (user_id, "Europe/Berlin")
    refused = upsert_user.sync(
        client=client, user_id=user_id, body=models.RecipientInRequest(timezone="Mars/Olympus")
    )
    assert isinstance(refused, models.ErrorResponseOut)
    assert (refused.error.code, refused.error.field) == ("invalid", "timezone")

    accepted = send_notification.sync(
        client=client,
        body=models.NotificationInRequest(
            event_id=str(uuid.uuid4()),
            user_id=user_id,
            category="order.shipped",
            payload=models.NotificationInRequestPayload.from_dict(ORDER),
            channels=[models.NotificationInRequestChannelsItem.INAPP],
        ),
    )
    assert isinstance(accepted, models.NotificationAcceptedOut)
    notification_id = accepted.notification_id
    assert isinstance(notification_id, uuid.UUID)

    def delivered():
        status = get_notification_status.sync(client=client, notification_id=notification_id)
        assert isinstance(status, models.NotificationStatusOut)
        done = models.DeliveryStatusOutStatus.DELIVERED
        return status if [d.status for d in status.deliveries] == [done] else None

    status = wait_for(delivered, what="the in-app delivery")
    assert status.deliveries[0].channel == "inapp"

    page = list_feed.sync(client=client, user_id=user_id)
    assert isinstance(page, models.FeedPageOut)
    (entry,) = page.results
    assert (entry.notification_id, entry.read_at) == (notification_id, None)
    unread = get_unread_count.sync(client=client, user_id=user_id)
    assert isinstance(unread, models.UnreadCountOut) and unread.count == 1

    marked = mark_feed_read.sync(
        client=client, user_id=user_id, body=models.FeedReadInRequestByIds(ids=[entry.id])
    )
    assert isinstance(marked, models.FeedReadOut) and marked.marked == 1
    assert get_unread_count.sync(client=client, user_id=user_id).count == 0
    (entry,) = list_feed.sync(client=client, user_id=user_id).results
    assert entry.read_at is not None
