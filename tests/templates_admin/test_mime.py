"""The directly written email reads, to a mail client, exactly as Django's would."""

from __future__ import annotations

import email
import email.policy

import pytest
from django.core.mail import EmailMultiAlternatives

from templates_admin.mime import alternative_bytes

HEADERS = {
    "Message-ID": "<1.2@notify.example>",
    "List-Unsubscribe": "<https://notify.example/u/abc>",
    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
}


def read(data: bytes) -> dict:
    """What a mail client shows: headers decoded, and each part's text."""
    message = email.message_from_bytes(data, policy=email.policy.default)
    return {
        # Django folds a long encoded subject onto its own line, which a client reads
        # with a leading space; ours has none. The words are what must match.
        "subject": str(message["Subject"]).strip(),
        "from": str(message["From"]),
        "to": str(message["To"]),
        "headers": {name: str(message[name]) for name in HEADERS},
        "type": message.get_content_type(),
        "text": message.get_body(("plain",)).get_content().replace("\r\n", "\n"),
        "html": message.get_body(("html",)).get_content().replace("\r\n", "\n"),
        "date": message["Date"] is not None,
        "defects": [str(d) for p in message.walk() for d in p.defects],
    }


def django_bytes(subject: str, text: str, html: str) -> bytes:
    message = EmailMultiAlternatives(
        subject=subject,
        body=text,
        from_email="Notify <notify@example.com>",
        to=["ana@example.com"],
        headers=HEADERS,
    )
    message.attach_alternative(html, "text/html")
    return message.message().as_bytes(linesep="\r\n")


@pytest.mark.parametrize(
    ("subject", "text", "html"),
    [
        ("Your order shipped", "Order C-1 is on its way.\n", "<h1>On its way</h1>"),
        ("Ваш заказ отправлен ✓ — ça part", "Заказ C-1 в пути.\nMerci !", "<p>Ünïcode ✓</p>"),
        ("Long lines", "x" * 1500 + "\nshort", "<p>" + "é" * 700 + "</p>"),
        ("Line ends", "one\r\ntwo\nthree\r\n.\n..dots\n", "<p>a</p>\r\n<p>b</p>"),
        ("Looks like MIME", "--===============x==\nContent-Type: text/html\n", "=3D =?utf-8?q?x?="),
    ],
)
def test_a_client_reads_the_same_message_as_djangos(subject, text, html):
    ours = alternative_bytes(
        subject=subject,
        from_header="Notify <notify@example.com>",
        to_header="ana@example.com",
        text=text,
        html=html,
        headers=HEADERS,
        local_time=False,
    )
    assert ours is not None
    assert all(len(line) <= 998 for line in ours.split(b"\r\n"))
    assert b"\n" not in ours.replace(b"\r\n", b"")  # every line ends CRLF
    assert read(ours) == read(django_bytes(subject, text, html))
    assert read(ours)["defects"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Injected": "a\r\nBcc: victim@example.com"},
        {"X-Injected": "a\nBcc: victim@example.com"},
        {"X-Injected": "a\rb"},
        {"X-Long": "y" * 1200},
        {"Cc": "other@example.com"},
        {"X-Name": "Zoë"},
    ],
)
def test_headers_outside_the_simple_shape_are_left_to_django(headers):
    written = alternative_bytes(
        subject="Hi",
        from_header="notify@example.com",
        to_header="ana@example.com",
        text="t",
        html="<p>h</p>",
        headers=headers,
        local_time=False,
    )
    assert written is None
