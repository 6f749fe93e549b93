"""Who hears of a round's changes to deliveries, inside the round's transaction.

A round of the pipeline (routing, the outcome of attempts, the quiet-hours release,
provider news, an SMS receipt) announces what it changed once, with `changes_announce`.
Apps above deliveries that keep their own record of those changes (the status webhooks'
events) register a listener when they load, so the pipeline never names them. A
listener writes in the caller's transaction: what it writes commits or rolls back with
the change itself. With no listener, an announcement costs nothing.

A listener may also ride: given a round's changes before the round writes them, it
returns a data-modifying CTE that the round runs inside its own statement
(`changes_ride`), so its write costs the round no round trip of its own. The round then
announces as before, naming the deliveries whose events rode (`ridden`); a listener that
rides leaves those out, and one that does not ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flow.campaign_statements import statements_unslotted


@dataclass(frozen=True)
class Subject:
    """What a changed delivery is about, as the round has it in memory: a listener that
    describes the change needs not read it back. `reason`: the delivery's reason as the
    round wrote it."""

    producer_id: int
    event_id: str
    category: str
    channel: str
    notification_id: object
    user_id: str
    reason: str


def subject_of(notification: Any, *, channel: str, reason: str) -> Subject:
    """The subject of a delivery of `notification` (loaded with its recipient and
    category) on `channel`."""
    return Subject(
        producer_id=notification.producer_id,
        event_id=notification.event_id,
        category=notification.category.key,
        channel=channel,
        notification_id=notification.pk,
        user_id=notification.recipient.user_id,
        reason=reason or "",
    )


def subject_loaded(delivery: Any, *, reason: str | None) -> Subject | None:
    """The subject of `delivery` when the round loaded it with its notification (and so
    its recipient and category); None otherwise. `reason`: as written, None when the
    round left it as it was."""
    descriptor = type(delivery).notification
    if not descriptor.is_cached(delivery):
        return None
    written = delivery.reason if reason is None else reason
    return subject_of(delivery.notification, channel=delivery.channel, reason=written)


@dataclass(frozen=True)
class RoundChanges:
    """What one round changed (see `changes_announce`)."""

    deliveries: list[tuple[int, datetime, str]]
    notifications: list[tuple[object, datetime]]
    news: list[tuple[int, datetime, str]]
    reported: bool
    reported_at: datetime | None
    providers: Mapping[int, str] = field(default_factory=dict)
    created: list[tuple[int, datetime]] | None = None
    subjects: Mapping[int, Subject] = field(default_factory=dict)
    # Deliveries whose changes the riders wrote in the round's own statement.
    ridden: frozenset[int] = frozenset()


ChangeListener = Callable[[RoundChanges], object]
# (changes, the name of the round's CTE that returns the `id` of each delivery it wrote)
# -> (a data-modifying statement to run as a CTE of the round's, its parameters), or
# None when it has nothing to ride with. Its parameter names must be its own.
ChangeRider = Callable[..., tuple[str, dict[str, Any]] | None]

_listeners: list[ChangeListener] = []
_riders: list[ChangeRider] = []


@dataclass(frozen=True)
class Ride:
    """What rides in a round's statement: CTEs to add to its WITH (each starting with a
    comma; empty: nothing rides), and their parameters. When something rides, every
    rider rode, for every delivery the round named."""

    ctes: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)


NO_RIDE = Ride()


def change_rider_add(rider: ChangeRider) -> None:
    """Ride in every round that offers it from now on (once per rider)."""
    if rider not in _riders:
        _riders.append(rider)


def changes_ride(
    *,
    deliveries: Iterable[tuple[int, datetime, str]],
    providers: Mapping[int, str] | None = None,
    subjects: Callable[[], Mapping[int, Subject]] | None = None,
    written: str,
) -> Ride:
    """The riders' writes for a round's delivery changes (as `changes_announce` takes
    them), to run in the round's own statement, whose CTE `written` returns the `id` of
    each delivery it wrote: a rider writes only for those. Announce the round afterwards
    as usual, with `ridden` the ids `written` returned when something rode. When one
    rider declines, none rides: `ridden` means the same to every listener."""
    if not _riders:
        return NO_RIDE
    changes = RoundChanges(
        list(deliveries), [], [], False, None, providers or {}, None,
        subjects() if subjects is not None else {},
    )  # fmt: skip
    ctes: list[str] = []
    params: dict[str, Any] = {}
    for number, rider in enumerate(_riders):
        offered = rider(changes, written=written)
        if offered is None:
            return NO_RIDE
        sql, own = offered
        ctes.append(f", ride_{number} AS ({sql})")
        params.update(own)
    return Ride("".join(ctes), params)


def change_listener_add(listener: ChangeListener) -> None:
    """Hear every round's changes from now on (once per listener, in order of adding)."""
    if listener not in _listeners:
        _listeners.append(listener)


def changes_announce(
    *,
    deliveries: Iterable[tuple[int, datetime, str]] = (),
    notifications: Iterable[tuple[object, datetime]] = (),
    news: Iterable[tuple[int, datetime, str]] = (),
    reported: bool = False,
    reported_at: datetime | None = None,
    providers: Mapping[int, str] | None = None,
    created: Iterable[tuple[int, datetime]] | None = None,
    subjects: Callable[[], Mapping[int, Subject]] | None = None,
    ridden: Iterable[int] = (),
) -> None:
    """Tell every listener what this round changed. Call inside the round's transaction.

    `deliveries`: (id, accepted_at, status written) of deliveries whose status this round
    wrote; `notifications`: (id, created_at) of notifications it routed; `news`: (id,
    accepted_at, provider event kind) of provider news about a delivery that changes no
    status (a spam complaint, an open, a click). `reported`: the provider told us what
    these delivery changes say (its webhook, an SMS receipt), at `reported_at` when it
    gave a time. `providers`: delivery id → the provider this round's try went to (a
    channel that fails over may have handed it on from its primary); a delivery not
    named here was not tried in this round. `created`: (id, accepted_at) of every
    delivery the routed notifications got, when the round knows them. `subjects`: what the
    round has in memory about the deliveries it names (called only when someone listens):
    a listener may describe those from it rather than read them back. `ridden`: the
    deliveries whose changes riders wrote in the round's statement (`changes_ride`).
    """
    if not _listeners:
        return
    changes = RoundChanges(
        list(deliveries),
        list(notifications),
        list(news),
        reported,
        reported_at,
        providers or {},
        None if created is None else list(created),
        subjects() if subjects is not None else {},
        frozenset(ridden),
    )
    # Appends in the round's open transaction: a campaign's round has its slot's work
    # done and holds its rows' locks, so they do not queue for another slot (unless a
    # login code is in flight: flow/campaign_statements.py).
    with statements_unslotted():
        for listener in _listeners:
            listener(changes)
