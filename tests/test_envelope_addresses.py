"""The recipient's address as the SMTP session writes it: Django's sanitized form, also
when a plain address skips the parser."""

from __future__ import annotations

import pytest
from django.core.mail.message import sanitize_address

from deliveries.channels.smtp import address_sanitized

ADDRESSES = [
    "bench-c-0000001@bench.example",
    "A.B@Example.COM",
    "o'brien+tag@sub.domain.co.uk",
    "x_y{z}~1@a-b.io",
    "a..b@x.com",
    "José@x.com",
    "a@exämple.com",
    "Name <a@x.com>",
    '"a b"@x.com',
    "a@" + "b" * 63 + ".com",
]


@pytest.mark.parametrize("address", ADDRESSES)
def test_an_address_is_written_as_django_sanitizes_it(address):
    assert address_sanitized(address, "utf-8") == sanitize_address(address, "utf-8")


@pytest.mark.parametrize("address", ["a@x.com.", "a@" + "b" * 64 + ".com", "a@"])
def test_an_address_django_refuses_is_refused(address):
    with pytest.raises(ValueError):
        sanitize_address(address, "utf-8")
    with pytest.raises(ValueError):
        address_sanitized(address, "utf-8")
