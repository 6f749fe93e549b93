"""Schemathesis hooks for the contract test: what the fuzzer draws for our named formats.

Loaded by the `st` process (SCHEMATHESIS_HOOKS), which does not set up Django.
"""

from __future__ import annotations

import base64
import zoneinfo

import schemathesis
from hypothesis import strategies as st

# notify.api.serializers.TIME_ZONE_FORMAT (the contract test checks they agree): a time
# zone's IANA name, valid only if the server's tz database knows it, so the fuzzer draws
# valid values from the same database (invalid ones are other types, or other text).
TIME_ZONE_FORMAT = "iana-time-zone"

schemathesis.openapi.format(
    TIME_ZONE_FORMAT, st.sampled_from(sorted(zoneinfo.available_timezones()))
)

# notify.api.serializers.FEED_CURSOR_FORMAT (checked likewise): a `next_cursor` the API
# issued, which names a feed position (notify.selectors.encode_cursor): the fuzzer draws
# positions, each valid whether or not an entry is there.
FEED_CURSOR_FORMAT = "feed-cursor"
_MICROS = st.integers(min_value=0, max_value=2**52)  # since 1970: up to the year 2112


def _cursor(occurred: int, accepted: int, entry_id: int) -> str:
    raw = f"o:{occurred}:{accepted}:{entry_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


schemathesis.openapi.format(
    FEED_CURSOR_FORMAT,
    st.builds(_cursor, _MICROS, _MICROS, st.integers(min_value=0, max_value=2**63 - 1)),
)
