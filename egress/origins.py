"""Which Web Push endpoints we may post to (WEBPUSH_ALLOWED_ORIGINS): no SSRF.

A Web Push endpoint is a URL a browser hands us, so anyone can register one. We post
only to listed origins: `scheme://host[:port]`, or `scheme://*.domain[:port]` for any
subdomain of `domain`. A host reached through a wildcard (or any name not listed
exactly) must also resolve to public addresses only: loopback, private, link-local and
other special-purpose space is refused unless the origin is listed exactly, which is how
a local push peer is allowed. Checked at registration (a 400) and again before each send
(the setting or DNS may have changed since).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

_DEFAULT_PORTS = {"http": 80, "https": 443}

Resolver = Callable[[str, int], list[str]]


class EndpointRefused(Exception):
    """The endpoint is not one we may post to; `retryable` when only DNS failed."""

    def __init__(self, reason: str, *, retryable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


@dataclass(frozen=True)
class AllowedOrigin:
    scheme: str
    host: str  # lower case; for a wildcard, the domain after `*.`
    port: int
    wildcard: bool

    def matches(self, scheme: str, host: str, port: int) -> bool:
        if (scheme, port) != (self.scheme, self.port):
            return False
        return host.endswith("." + self.host) if self.wildcard else host == self.host


@lru_cache(maxsize=8)
def allowed_origins(entries: tuple[str, ...]) -> tuple[AllowedOrigin, ...]:
    """WEBPUSH_ALLOWED_ORIGINS parsed; a malformed entry stops the process loudly."""
    origins = []
    for entry in entries:
        parts = urlsplit(entry.strip())
        try:
            port = parts.port
        except ValueError:
            port = -1
        host = (parts.hostname or "").lower()
        if (
            parts.scheme not in _DEFAULT_PORTS
            or not host
            or port == -1
            or parts.path.strip("/")
            or parts.username
        ):
            raise ImproperlyConfigured(
                f"WEBPUSH_ALLOWED_ORIGINS: {entry!r} is not scheme://host[:port] (http/https)"
            )
        wildcard = host.startswith("*.")
        origins.append(
            AllowedOrigin(
                scheme=parts.scheme,
                host=host[2:] if wildcard else host,
                port=port or _DEFAULT_PORTS[parts.scheme],
                wildcard=wildcard,
            )
        )
    return tuple(origins)


def resolve_addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver)."""
    infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    return [info[4][0] for info in infos]


# IPv6 space refused whatever it carries: no public host is reached through it, and what
# it does reach (a tunnel, a translator of the local network) is not ours to judge.
_NEVER_PUBLIC_V6 = (
    ipaddress.IPv6Network("::/96"),  # IPv4-compatible (deprecated), with :: and ::1
    ipaddress.IPv6Network("::ffff:0:0:0/96"),  # IPv4-translated (SIIT)
    ipaddress.IPv6Network("64:ff9b:1::/48"),  # local-use NAT64: the network's own translator
    ipaddress.IPv6Network("2001::/32"),  # Teredo: a tunnel through some relay
)
# The well-known NAT64 prefix: a connection to it reaches the IPv4 address in its last 32 bits.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a connection to `ip` really reaches (IPv4-mapped, NAT64, 6to4)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def address_is_public(address: str) -> bool:
    """Whether an unlisted endpoint may be reached at `address`: globally routable unicast.

    An IPv6 form that carries an IPv4 address is judged by that IPv4 address, so
    `64:ff9b::7f00:1` (NAT64), `2002:7f00:1::` (6to4) and `::ffff:169.254.169.254` are
    loopback and metadata, as what they reach is.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # a scope id (`%eth0`) is no part
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _NEVER_PUBLIC_V6):
            return False
        ip = _embedded_ipv4(ip) or ip
    return ip.is_global and not ip.is_multicast


def url_origin(url: str, *, invalid: str, no_host: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an http(s) URL without credentials, lower-cased, the port
    filled in; EndpointRefused with `invalid` or `no_host` (each check's own words) else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise EndpointRefused(invalid) from None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise EndpointRefused(no_host)
    if parts.username is not None or parts.password is not None:
        raise EndpointRefused("must not carry credentials")
    return scheme, host, port or _DEFAULT_PORTS[scheme]


def endpoint_check(
    endpoint: str,
    *,
    origins: Sequence[str] | None = None,
    resolve: Resolver = resolve_addresses,
) -> None:
    """Raise EndpointRefused unless we may post to `endpoint` (see the module docstring)."""
    scheme, host, port = url_origin(
        endpoint, invalid="not a valid URL", no_host="must be an http(s) URL with a host"
    )
    entries = tuple(settings.WEBPUSH_ALLOWED_ORIGINS if origins is None else origins)
    matched = [o for o in allowed_origins(entries) if o.matches(scheme, host, port)]
    if not matched:
        raise EndpointRefused("is not a push service this server sends to")
    if any(not origin.wildcard for origin in matched):
        return  # listed exactly: the operator vouches for it, local or not
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError):
        raise EndpointRefused("its host does not resolve", retryable=True) from None
    if not addresses or not all(address_is_public(address) for address in addresses):
        raise EndpointRefused("resolves to a non-public address")
