"""`manage.py check --deploy` warnings about API keys that can reach every team's data."""

from __future__ import annotations

from django.core import checks
from django.db import DatabaseError

from notify.models import DANGEROUS_SCOPES, ApiKey, Scope


def keys_holding_everything() -> list[ApiKey]:
    """Active keys that hold a scope reaching every person or team (erasing people,
    changing categories) together with every other scope: typically keys made before
    keys became least-privilege, whose powers were written out in full."""
    every = set(Scope.values)
    return [
        api_key
        for api_key in ApiKey.objects.filter(revoked_at__isnull=True).select_related("producer")
        if every <= set(api_key.scopes or ()) and set(DANGEROUS_SCOPES) & set(api_key.scopes)
    ]


@checks.register(checks.Tags.security, deploy=True)
def check_keys_holding_everything(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Warn about each key that holds users:erase or categories:write beside everything else."""
    try:
        found = keys_holding_everything()
    except DatabaseError:  # no database yet (a check before migrate): nothing to say
        return []
    return [
        checks.Warning(
            f"API key {api_key.prefix}… of producer {api_key.producer.name!r} holds every scope, "
            f"including {', '.join(s for s in DANGEROUS_SCOPES if s in api_key.scopes)}.",
            hint="Issue keys with only the scopes each client needs "
            "(manage.py create_producer NAME --scopes …) and revoke this one in admin.",
            id="notify.W010",
        )
        for api_key in found
    ]
