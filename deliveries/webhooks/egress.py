"""Where an outbound call to a URL someone registered (a producer's webhook endpoint) may
go: the egress rules the push channels keep, for any public HTTPS host.

An endpoint must be `https://host[:port]/…` without credentials, and its host must
resolve to public addresses only: loopback, private, link-local (cloud metadata at
169.254.169.254), multicast and other special-purpose space is refused, unless the
endpoint's origin is listed exactly in `allowed_private` (then http is allowed too).
Checked at registration (a 400) and again before each post (DNS may have changed).
The post itself goes through `BoundedSession` (deliveries/channels/base.py): no
redirect, no proxy from the environment, a total deadline, a bounded read.
"""

from __future__ import annotations

from collections.abc import Sequence

from deliveries.channels.push_origins import (
    EndpointRefused,
    Resolver,
    allowed_origins,
    is_public_address,
    resolve_addresses,
    url_origin,
)


def public_url_check(
    url: str, *, allowed_private: Sequence[str], resolve: Resolver = resolve_addresses
) -> None:
    """Raise EndpointRefused unless we may post to `url` (see the module docstring)."""
    scheme, host, port = url_origin(
        url, invalid="is not a valid URL", no_host="must be an https URL with a host"
    )
    listed = allowed_origins(tuple(allowed_private))
    if any(not o.wildcard and o.matches(scheme, host, port) for o in listed):
        return  # listed exactly: the operator vouches for it, local or not
    if scheme != "https":
        raise EndpointRefused("must be an https URL")
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError, ValueError):  # ValueError: a NUL in the name
        raise EndpointRefused("its host does not resolve", retryable=True) from None
    if not addresses or not all(is_public_address(address) for address in addresses):
        raise EndpointRefused("resolves to a private, loopback or metadata address")
