"""The firebase-admin app FCM sends through: one per configured credentials, send URL
and timeouts, its HTTP session on the bounded, non-retrying transport."""

from __future__ import annotations

import json
import threading
from typing import Any

import firebase_admin
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from firebase_admin import credentials, messaging

from egress.sessions import bounded_mount

# Connections the SDK's session keeps to FCM; fcm.py posts on as many threads at most.
FCM_CONNECTIONS = 100

_app_lock = threading.Lock()
_apps: dict[tuple[str, str, float, float], firebase_admin.App] = {}


def _credential() -> credentials.Certificate:
    raw = settings.FCM_CREDENTIALS.strip()
    if not raw:
        raise ImproperlyConfigured("FCM_CREDENTIALS is not set (a service-account JSON file)")
    # A path (the documented form) or the JSON itself, for secrets injected as text.
    return credentials.Certificate(json.loads(raw) if raw.startswith("{") else raw)


def fcm_app() -> firebase_admin.App:
    """The firebase-admin app for the configured credentials and send URL (one per pair)."""
    key = (
        settings.FCM_CREDENTIALS,
        settings.FCM_SEND_URL,
        settings.NOTIFY_PUSH_REQUEST_TIMEOUT,
        settings.NOTIFY_PROVIDER_CALL_DEADLINES["fcm"],
    )
    with _app_lock:
        app = _apps.get(key)
        if app is None:
            app = firebase_admin.initialize_app(
                _credential(),
                options={"httpTimeout": settings.NOTIFY_PUSH_REQUEST_TIMEOUT},
                name=f"notify-{len(_apps)}",
            )
            configure_messaging(messaging._get_messaging_service(app))
            _apps[key] = app
        return app


def configure_messaging(service: Any) -> None:
    """The one place that reaches into firebase-admin's private attributes.

    It points the send URL at FCM_SEND_URL when set (an emulator or the test peer),
    replaces the SDK's retrying HTTP adapters with non-retrying ones, and reads the
    environment's proxy and CA bundle for that URL once, here: requests would read the
    environment (and look for a .netrc) again at every post. The canary test
    (tests/deliveries/push/test_fcm.py) fails loudly if an upgrade renames what is touched here.
    """
    current = getattr(service, "_fcm_url", None)
    if not isinstance(current, str) or "messages:send" not in current:
        raise RuntimeError(
            "firebase-admin no longer keeps its send URL in _MessagingService._fcm_url; "
            "update deliveries/channels/fcm_app.py:configure_messaging for this version"
        )
    if settings.FCM_SEND_URL:
        service._fcm_url = settings.FCM_SEND_URL.format(project_id=service._project_id)
    # No retries, a total deadline per request and a bounded read of each answer.
    session = service._client.session
    bounded_mount(
        session,
        total_seconds=settings.NOTIFY_PROVIDER_CALL_DEADLINES["fcm"],
        max_bytes=settings.NOTIFY_FCM_MAX_RESPONSE_BYTES,
        max_retries=0,
        pool_maxsize=FCM_CONNECTIONS,
    )
    # Every post goes to the one send URL: what the environment says for it holds for
    # all of them. (The access token is fetched on a session of its own, untouched.)
    environment = session.merge_environment_settings(service._fcm_url, {}, None, None, None)
    session.proxies.update(environment["proxies"])
    session.verify = environment["verify"]
    session.trust_env = False
