"""API keys: issuing, authenticating (cached per process), revoking, and what a key may send."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from notify.cache import TtlCache
from notify.models import DEFAULT_SCOPES, ApiKey, Category, Producer, Scope

API_KEY_PREFIX = "nk"


def _hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    key: str  # shown once; only its hash is stored


# The producer fields a quota may be set in (notify.quotas reads them).
PRODUCER_QUOTA_FIELDS = ("events_per_minute", "events_per_day", "campaign_events_per_day")


def api_key_issue(
    *,
    producer_name: str,
    category_keys: list[str] | None = None,
    scopes: list[str] | None = None,
    quotas: dict[str, int] | None = None,
) -> IssuedKey:
    """A new key for the producer (created if new).

    No categories given → all categories; no scopes given → DEFAULT_SCOPES only (send,
    and read what its own producer sent): every other power is named. `quotas` sets the
    producer's event quotas (fields of Producer: events_per_minute, events_per_day,
    campaign_events_per_day). An unknown category or scope raises ValueError.
    """
    unknown_scopes = sorted(set(scopes or ()) - set(Scope.values))
    if unknown_scopes:
        raise ValueError(f"unknown scopes: {', '.join(unknown_scopes)}")
    unknown_quotas = sorted(set(quotas or ()) - set(PRODUCER_QUOTA_FIELDS))
    if unknown_quotas:
        raise ValueError(f"unknown quotas: {', '.join(unknown_quotas)}")
    with transaction.atomic():
        producer, _ = Producer.objects.get_or_create(name=producer_name)
        if quotas:
            Producer.objects.filter(pk=producer.pk).update(**quotas)
        prefix = secrets.token_hex(6)
        key = f"{API_KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
        api_key = ApiKey.objects.create(
            producer=producer,
            prefix=prefix,
            key_hash=_hash_key(key),
            all_categories=not category_keys,
            scopes=sorted(set(scopes or DEFAULT_SCOPES)),
        )
        if category_keys:
            categories = list(Category.objects.filter(key__in=category_keys))
            missing = set(category_keys) - {category.key for category in categories}
            if missing:
                raise ValueError(f"unknown categories: {', '.join(sorted(missing))}")
            api_key.categories.set(categories)
    return IssuedKey(api_key=api_key, key=key)


_keys: TtlCache[ApiKey | None] = TtlCache(lambda: settings.NOTIFY_AUTH_CACHE_SECONDS)


def api_key_authenticate(*, key: str) -> ApiKey | None:
    """The active key matching `key`, or None. Constant-time hash comparison.

    Cached in the process for NOTIFY_AUTH_CACHE_SECONDS with the categories it may send,
    so a request costs no query for it; a revoked key is refused within that time.
    """
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != API_KEY_PREFIX:
        return None
    if not parts[1].isascii() or not parts[1].isalnum() or len(parts[1]) > 16:
        return None  # no prefix we issue (hex): not worth a query, nor a NUL in one
    api_key = _keys.get(parts[1], lambda: _api_key_load(prefix=parts[1]))
    if api_key is None or not hmac.compare_digest(api_key.key_hash, _hash_key(key)):
        return None
    return api_key


def _api_key_load(*, prefix: str) -> ApiKey | None:
    api_key = (
        ApiKey.objects.select_related("producer")
        .filter(prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if api_key is not None and not api_key.all_categories:
        api_key.allowed_category_ids = frozenset(api_key.categories.values_list("pk", flat=True))
    return api_key


def api_key_revoke(*, api_key: ApiKey) -> None:
    ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    _keys.clear()  # this process at once; others within NOTIFY_AUTH_CACHE_SECONDS


def api_key_may_send(*, api_key: ApiKey, category: Category) -> bool:
    if api_key.all_categories:
        return True
    allowed = getattr(api_key, "allowed_category_ids", None)
    if allowed is None:  # a key that did not come through api_key_authenticate
        return api_key.categories.filter(pk=category.pk).exists()
    return category.pk in allowed
