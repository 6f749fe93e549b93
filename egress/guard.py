"""Where an outbound call to a URL someone registered (a producer's webhook endpoint) may
go: the egress rules the push channels keep, for any public HTTPS host.

An endpoint must be `https://host[:port]/…` without credentials, and its host must
resolve to public addresses only (`address_is_public`): loopback, private, link-local
(cloud metadata at 169.254.169.254), multicast and other special-purpose space is
refused, also when an IPv6 form carries it (NAT64, 6to4, IPv4-mapped), unless the
endpoint's origin is listed exactly in `allowed_private` (then http is allowed too).
Checked at registration (a 400) and again before each post (DNS may have changed).

Before a post the host is resolved once (`egress_target`), and the post connects only to
the addresses that check judged (`connections_pinned`): the HTTP client never looks the
name up again, so a DNS answer that changes between the check and the connect (DNS
rebinding, to 127.0.0.1 or 169.254.169.254) reaches nothing. The URL, the Host header,
TLS SNI and certificate verification still use the name. The post goes through
`egress_session`, a `BoundedSession` (egress/sessions.py): no redirect, no
proxy from the environment, a total deadline, a bounded read.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError
from urllib3.util.connection import create_connection

from egress.deadline import BoundedAdapter
from egress.origins import (
    EndpointRefused,
    Resolver,
    address_is_public,
    allowed_origins,
    resolve_addresses,
    url_origin,
)
from egress.sessions import BoundedSession


@dataclass(frozen=True)
class EgressTarget:
    """Where one post may connect: the URL's host and port, and every address the host
    resolved to when it was checked (all of them allowed), in the resolver's order."""

    host: str
    port: int
    addresses: tuple[str, ...]


def _origin(url: str, allowed_private: Sequence[str]) -> tuple[str, str, int, bool]:
    """(scheme, host, port, whether the origin is listed exactly in `allowed_private`)."""
    scheme, host, port = url_origin(
        url, invalid="is not a valid URL", no_host="must be an https URL with a host"
    )
    listed = allowed_origins(tuple(allowed_private))
    exactly = any(not o.wildcard and o.matches(scheme, host, port) for o in listed)
    return scheme, host, port, exactly


def _addresses(host: str, port: int, resolve: Resolver) -> tuple[str, ...]:
    """The host's addresses, looked up once; an address literal is its own."""
    try:
        return (str(ipaddress.ip_address(host)),)
    except ValueError:
        pass
    try:
        found = resolve(host, port)
    except (OSError, UnicodeError, ValueError):  # ValueError: a NUL in the name
        raise EndpointRefused("its host does not resolve", retryable=True) from None
    if not found:
        raise EndpointRefused("its host does not resolve", retryable=True)
    return tuple(dict.fromkeys(found))


def egress_target(
    url: str, *, allowed_private: Sequence[str], resolve: Resolver = resolve_addresses
) -> EgressTarget:
    """Resolve `url`'s host once and judge every address; raise EndpointRefused unless we
    may post there (see the module docstring). The post then connects only to the
    addresses returned (`connections_pinned`). A listed origin's addresses are not
    judged (the operator vouches for it), but the post is pinned to them all the same."""
    scheme, host, port, listed = _origin(url, allowed_private)
    if scheme != "https" and not listed:
        raise EndpointRefused("must be an https URL")
    addresses = _addresses(host, port, resolve)
    if not listed and not all(address_is_public(address) for address in addresses):
        raise EndpointRefused("resolves to a private, loopback or metadata address")
    return EgressTarget(host=host, port=port, addresses=addresses)


def public_url_check(
    url: str, *, allowed_private: Sequence[str], resolve: Resolver = resolve_addresses
) -> None:
    """Raise EndpointRefused unless we may post to `url` (see the module docstring); at
    registration, where a listed origin need not resolve yet."""
    if not _origin(url, allowed_private)[3]:
        egress_target(url, allowed_private=allowed_private, resolve=resolve)


_pinned = threading.local()


@contextlib.contextmanager
def connections_pinned(target: EgressTarget) -> Iterator[None]:
    """Within the block, a new connection of `egress_session` in this thread goes only to
    `target`'s checked addresses; outside any such block it connects nowhere."""
    _pinned.target = target
    try:
        yield
    finally:
        _pinned.target = None


def _same_host(a: str, b: str) -> bool:
    return a.rstrip(".").lower() == b.rstrip(".").lower()  # urllib3 drops a final dot


class _PinnedConnection:
    """Mixed into urllib3's connections: the socket is connected to the addresses the
    egress check judged, in order, instead of to a fresh lookup of the name. A pooled
    connection kept from an earlier post was connected the same way, to an address
    judged by the same rules for the same origin."""

    host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any

    def _new_conn(self) -> socket.socket:
        target: EgressTarget | None = getattr(_pinned, "target", None)
        if target is None or not (_same_host(target.host, self.host) and target.port == self.port):
            raise NewConnectionError(self, "egress: no checked address for this host")
        error: Exception = NewConnectionError(self, "egress: the host has no checked address")
        for address in target.addresses:
            try:
                return create_connection(
                    (address, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError:  # socket.timeout
                error = ConnectTimeoutError(
                    self, f"Connection to {self.host} at {address} timed out"
                )
            except OSError as failed:
                error = NewConnectionError(
                    self, f"Failed to establish a new connection to {address}: {failed}"
                )
        raise error


class PinnedAdapter(BoundedAdapter):
    """A `BoundedAdapter` whose connections go only to the pinned addresses."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        pools = self.poolmanager.pool_classes_by_scheme
        self.poolmanager.pool_classes_by_scheme = {
            scheme: type(
                f"Pinned{pool.__name__}",
                (pool,),
                {
                    "ConnectionCls": type(
                        "PinnedConnection", (_PinnedConnection, pool.ConnectionCls), {}
                    )
                },
            )
            for scheme, pool in pools.items()
        }


def egress_session(total_seconds: float, max_bytes: int) -> BoundedSession:
    """The process's shared session for posts to registered URLs (pinned, bounded)."""
    return _egress_session(total_seconds, max_bytes, settings.NOTIFY_PUSH_KEPT_IDLE_MAX)


@lru_cache(maxsize=4)
def _egress_session(total_seconds: float, max_bytes: int, kept_idle_max: float) -> BoundedSession:
    session = BoundedSession(
        total_seconds=total_seconds, max_bytes=max_bytes, kept_idle_max=kept_idle_max
    )
    transport = PinnedAdapter(
        total_seconds=total_seconds, max_bytes=max_bytes, kept_idle_max=kept_idle_max
    )
    for prefix in list(session.adapters):
        session.mount(prefix, transport)
    return session
