"""Provider rate limits: one token bucket per provider, shared by all workers.

High and medium priority may take the whole bucket; low priority only while more than
NOTIFY_LOW_PRIORITY_RESERVE of it is left, so a throttled campaign never delays a
login code. A sender without a token is told how long to wait; it never drops work.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from notify.ratelimit import bucket_key


def provider_limit(provider: str) -> tuple[float, float]:
    """(rate per second, burst) for a provider, from NOTIFY_RATE_<PROVIDER>."""
    raw = settings.NOTIFY_PROVIDER_RATE_LIMITS.get(provider)
    if raw is None:
        raise ImproperlyConfigured(f"no rate limit configured for provider {provider!r}")
    try:
        rate, _, burst = raw.partition(":")
        values = float(rate), float(burst or rate)
    except ValueError:
        raise ImproperlyConfigured(
            f"NOTIFY_RATE_{provider.upper()} must look like '50:100' (rate/s:burst), got {raw!r}"
        ) from None
    if values[0] <= 0 or values[1] < 1:
        raise ImproperlyConfigured(f"NOTIFY_RATE_{provider.upper()} must be positive: {raw!r}")
    return values


def provider_for_channel(channel: str) -> str | None:
    """The provider a channel's sends count against (None: not rate limited, e.g. inapp)."""
    return settings.NOTIFY_CHANNEL_PROVIDERS.get(channel)


def provider_bucket_key(provider: str) -> str:
    """The Redis key of a provider's token bucket."""
    return bucket_key("provider", provider)
