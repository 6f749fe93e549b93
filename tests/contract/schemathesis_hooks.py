"""Schemathesis hooks for the contract test: what the fuzzer draws for our named formats.

Loaded by the `st` process (SCHEMATHESIS_HOOKS), which does not set up Django.
"""

from __future__ import annotations

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
