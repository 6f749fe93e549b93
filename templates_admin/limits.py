"""What a template's rendered sample must fit before it is saved: the channel's limits
(push title and body lengths, SMS parts) and a link a person can safely open.

A link (the `url` field of push and in-app templates) must be an absolute http(s) URL or
a path on the product's own site (`notify.links.link_is_safe`). It is checked twice: in
the text itself, where a literal scheme shows whatever the data (`javascript:{{ x }}`,
or `javascript:` in any branch or filter argument), and in every sample render. The
in-app channel drops a link that still fails at send, and `<notify-inbox>` links nothing
else, for a row written past this check.
"""

from __future__ import annotations

import math
import re
from typing import Any

from django.conf import settings

from notify.links import link_is_safe
from notify.models import Channel

# GSM 03.38: the basic set costs one septet, the extension set two (escape + char).
GSM7_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = set("^{}\\[~]|€\f")

LINK_RULE = "a link must start with https:// or http://, or be a path on your site such as /orders"
# Schemes that run code where a link opens; refused wherever they appear in a link's text
# (spaces and control characters removed first, as a browser would).
_SCRIPT_SCHEME = re.compile(r"(?<![a-z0-9+.\-])(?:javascript|vbscript|data):")
_IGNORED_IN_LINKS = re.compile(r"[\x00-\x20\x7f]")
_FIRST_TAG = re.compile(r"\{[{%#]")


def sms_segments(text: str) -> tuple[str, int]:
    """(`GSM-7` | `UCS-2`, number of SMS parts) for `text`.

    GSM-7: 160 septets in one part, 153 per part when concatenated; extension characters
    count twice. Anything outside GSM-7 makes the whole message UCS-2: 70 UTF-16 units in
    one part, 67 per part when concatenated.
    """
    if not text:
        return "GSM-7", 0
    if all(char in GSM7_BASIC or char in GSM7_EXTENSION for char in text):
        units = sum(2 if char in GSM7_EXTENSION else 1 for char in text)
        single, multi, encoding = 160, 153, "GSM-7"
    else:
        units = len(text.encode("utf-16-le")) // 2
        single, multi, encoding = 70, 67, "UCS-2"
    return encoding, 1 if units <= single else math.ceil(units / multi)


def link_source_problems(source: str) -> list[str]:
    """Why the text of a link template can never render a safe link, whatever the data:
    it starts with another scheme or `//` before its first tag, or names a script scheme
    anywhere."""
    if _SCRIPT_SCHEME.search(_IGNORED_IN_LINKS.sub("", source).lower()):
        return [f"a link may not run a script (javascript:, vbscript:, data:); {LINK_RULE}."]
    leading = _FIRST_TAG.split(source, maxsplit=1)[0]
    decided = ":" in leading or leading.lstrip()[:2] in ("//", "\\\\", "/\\", "\\/")
    if leading.strip() and decided and not link_is_safe(leading):
        return [f"the link starts with “{leading.strip()[:40]}”; {LINK_RULE}."]
    return []


def sample_problems(channel: str, rendered: Any, sample_no: int) -> list[tuple[str, str]]:
    """(field, message) for each limit a sample render breaks: push lengths, SMS parts,
    and a link that is not safe to open."""
    which = f"with sample payload #{sample_no}"
    problems = []
    if channel in (Channel.WEBPUSH, Channel.FCM):
        for field, limit in (
            ("title", settings.NOTIFY_PUSH_TITLE_MAX_CHARS),
            ("body", settings.NOTIFY_PUSH_BODY_MAX_CHARS),
        ):
            length = len(getattr(rendered, field))
            if length > limit:
                problems.append(
                    (
                        field,
                        f"{which} the text is {length} characters; a push shows at most "
                        f"{limit}. Please shorten it.",
                    )
                )
    if channel == Channel.SMS:
        encoding, parts = sms_segments(rendered.body)
        limit = settings.NOTIFY_SMS_MAX_SEGMENTS
        if parts > limit:
            problems.append(
                (
                    "body",
                    f"{which} the SMS takes {parts} parts ({encoding}"
                    f"{', because of non-Latin characters' if encoding == 'UCS-2' else ''}); "
                    f"the limit is {limit}. Please shorten it.",
                )
            )
    if rendered.url and not link_is_safe(rendered.url):
        shown = "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in rendered.url[:60])
        problems.append(("url", f"{which} the link is “{shown}”; {LINK_RULE}."))
    return problems
