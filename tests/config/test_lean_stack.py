"""The web process's handler (config/handlers.py) serves views marked `lean_stack` through
the short middleware stack, and they answer exactly as through the full one: the same
status, headers and body for a key, a user token, every refusal and a browser's CORS."""

from __future__ import annotations

import io

import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.handlers.wsgi import WSGIHandler
from django.test import RequestFactory

from config.handlers import NotifyWSGIHandler
from notify.api_keys import api_key_issue
from notify.models import Recipient, Scope
from notify.tokens import user_token_issue

ORIGIN = "https://shop.example.com"


def wsgi_get(handler, path: str, method: str = "GET", **headers: str):
    """(status, headers, body) of one request through a WSGI handler, as gunicorn calls it."""
    environ = RequestFactory()._base_environ(PATH_INFO=path, REQUEST_METHOD=method, **headers)
    environ["wsgi.input"] = io.BytesIO(b"")
    started = []
    result = handler(environ, lambda status, sent: started.append((status, sent)))
    try:
        body = b"".join(result)
    finally:
        result.close()
    status, sent = started[0]
    return status, sorted(sent), body


@pytest.fixture
def people(demo_data, settings):
    settings.NOTIFY_INBOX_ALLOWED_ORIGINS = [ORIGIN]
    alice = Recipient.objects.create(user_id="alice", email="alice@example.com")
    bob = Recipient.objects.create(user_id="bob", email="bob@example.com")
    return alice, bob


def bearer(value: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {value}"}


@pytest.mark.django_db(transaction=True)
def test_the_unread_count_answers_the_same_through_the_lean_stack(people, settings):
    alice, bob = people
    key = api_key_issue(producer_name="shop", scopes=[Scope.USERS_READ]).key
    narrowed = api_key_issue(producer_name="shop", scopes=[Scope.CATEGORIES_READ]).key
    token = user_token_issue(recipient_id=alice.pk)
    cases = {
        "key": bearer(key),
        "token": bearer(token),
        "no credentials": {},
        "unknown key": bearer("nk_0000_nope"),
        "malformed header": {"HTTP_AUTHORIZATION": "Basic abc"},
        "missing scope": bearer(narrowed),
        "someone else's token": {**bearer(user_token_issue(recipient_id=bob.pk))},
        "browser": {**bearer(token), "HTTP_ORIGIN": ORIGIN},
        "other origin": {**bearer(token), "HTTP_ORIGIN": "https://elsewhere.example"},
    }
    full, lean = WSGIHandler(), NotifyWSGIHandler()
    for name, headers in cases.items():
        for path in ("/v1/users/alice/unread-count", "/v1/users/nobody/unread-count"):
            assert wsgi_get(lean, path, **headers) == wsgi_get(full, path, **headers), name
    preflight = {
        "HTTP_ORIGIN": ORIGIN,
        "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "GET",
        "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "authorization",
    }
    path = "/v1/users/alice/unread-count"
    answer = wsgi_get(lean, path, "OPTIONS", **preflight)
    assert answer == wsgi_get(full, path, "OPTIONS", **preflight)
    assert answer[0].startswith("204")

    # Out of tokens: the same 429, Retry-After and body.
    settings.NOTIFY_USER_RATE_BURST = 1
    settings.NOTIFY_USER_RATE_PER_SECOND = 0.01
    limited = user_token_issue(recipient_id=bob.pk)
    wsgi_get(full, "/v1/users/bob/unread-count", **bearer(limited))
    refused = wsgi_get(full, "/v1/users/bob/unread-count", **bearer(limited))
    assert refused[0].startswith("429")
    assert wsgi_get(lean, "/v1/users/bob/unread-count", **bearer(limited)) == refused


@pytest.mark.django_db(transaction=True)
def test_only_lean_views_skip_the_session_middleware(people, monkeypatch):
    key = api_key_issue(producer_name="shop", scopes=[Scope.USERS_READ]).key
    seen: list[str] = []
    process_request = SessionMiddleware.process_request

    def counting(self, request):
        seen.append(request.path)
        return process_request(self, request)

    monkeypatch.setattr(SessionMiddleware, "process_request", counting)
    lean = NotifyWSGIHandler()
    assert wsgi_get(lean, "/v1/users/alice/unread-count", **bearer(key))[0].startswith("200")
    assert wsgi_get(lean, "/v1/users/alice/feed", **bearer(key))[0].startswith("200")
    assert wsgi_get(lean, "/v1/nowhere", **bearer(key))[0].startswith("404")
    assert seen == ["/v1/users/alice/feed", "/v1/nowhere"]


def test_the_lean_stack_is_the_full_one_less_some_in_the_same_order(settings):
    kept = [path for path in settings.MIDDLEWARE if path in settings.NOTIFY_LEAN_MIDDLEWARE]
    assert kept == settings.NOTIFY_LEAN_MIDDLEWARE
