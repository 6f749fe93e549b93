"""Who hears of a round's changes to deliveries, inside the round's transaction.

A round of the pipeline (routing, the outcome of attempts, the quiet-hours release,
provider news, an SMS receipt) announces what it changed once, with `changes_announce`.
Apps above deliveries that keep their own record of those changes (the status webhooks'
events) register a listener when they load, so the pipeline never names them. A
listener writes in the caller's transaction: what it writes commits or rolls back with
the change itself. With no listener, an announcement costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class RoundChanges:
    """What one round changed (see `changes_announce`)."""

    deliveries: list[tuple[int, datetime, str]]
    notifications: list[tuple[object, datetime]]
    news: list[tuple[int, datetime, str]]
    reported: bool
    reported_at: datetime | None
    providers: Mapping[int, str] = field(default_factory=dict)


ChangeListener = Callable[[RoundChanges], object]

_listeners: list[ChangeListener] = []


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
) -> None:
    """Tell every listener what this round changed. Call inside the round's transaction.

    `deliveries`: (id, accepted_at, status written) of deliveries whose status this round
    wrote; `notifications`: (id, created_at) of notifications it routed; `news`: (id,
    accepted_at, provider event kind) of provider news about a delivery that changes no
    status (a spam complaint, an open, a click). `reported`: the provider told us what
    these delivery changes say (its webhook, an SMS receipt), at `reported_at` when it
    gave a time. `providers`: delivery id → the provider this round's try went to (a
    channel that fails over may have handed it on from its primary); a delivery not
    named here was not tried in this round.
    """
    if not _listeners:
        return
    changes = RoundChanges(
        list(deliveries), list(notifications), list(news), reported, reported_at, providers or {}
    )
    for listener in _listeners:
        listener(changes)
