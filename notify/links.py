"""Which links Notify puts in front of a person: absolute http(s) URLs and paths on the
page's own site, nothing else.

A template renders each notification's link from staff-edited text and payload data, so
a link could be `javascript:…` (script run on a click in the inbox), `data:`, `vbscript:`
or a scheme some app handles. Browsers read a link leniently: they ignore the case of
the scheme, drop leading spaces and control characters, and remove tabs and newlines
anywhere (`java\\tscript:` is `javascript:`). So the rule here is strict rather than a
copy of that leniency: the edges are trimmed, any control character left refuses the
link, and a scheme, if there is one, must be http or https. A protocol-relative `//host`
(or with backslashes, which browsers read as slashes) leaves the site: refused too.
"""

from __future__ import annotations

import re

SAFE_SCHEMES = ("http", "https")
# What a browser drops from a link's edges: every C0 control and the space.
_EDGES = "".join(chr(code) for code in range(0x21))
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A scheme as a URL parser finds one: a letter, then letters, digits, `+`, `-` or `.`.
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def link_is_safe(url: str) -> bool:
    """Whether `url` may be shown as a link: an absolute http(s) URL or a relative path
    (`/orders/1`, `orders/1`, `?tab=2`, `#top`); empty, another scheme, a
    protocol-relative `//host` or a control character anywhere is not."""
    text = url.strip(_EDGES).strip()
    if not text or _CONTROL.search(text):
        return False
    if len(text) > 1 and text[0] in "/\\" and text[1] in "/\\":
        return False  # `//host`, `\\host`: another site, whatever the scheme
    scheme = _SCHEME.match(text)
    return scheme is None or scheme.group(1).lower() in SAFE_SCHEMES
