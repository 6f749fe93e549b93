"""Signed values made the cheap way are the very strings Django's signing makes: a link in
an email already sent, or a token already issued, reads back the same after the change."""

from __future__ import annotations

import hashlib
import hmac
from unittest import mock

import pytest
from django.core import signing

from notify.signed import signed_dumps
from notify.tokens import USER_TOKEN_PREFIX, USER_TOKEN_SALT, user_token_issue
from preferences import gate
from preferences.tokens import (
    PREFERENCE_CENTER_SALT,
    UNSUBSCRIBE_SALT,
    preference_center_token,
    unsubscribe_token,
)

OLD_KEY = "old-signing-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
NEW_KEY = "new-signing-key-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
NOW = 1_790_000_000.75  # a fixed clock: the timestamp is part of the string


@pytest.mark.parametrize(
    "value",
    [
        {"r": 42, "i": 1_790_000_000_750_000},
        {"r": 42, "c": 7, "ch": "email"},
        {"r": 0},
        {"r": -5, 'k"\\ey': 'a"b\\c\u2028é\n\x00', "big": 10**40},
        {"flag": True, "r": 1},
        {"r": 1.5, "none": None},
        {},
        "plain text",
        [1, "é ü", {"nested": None, "flag": True, "x": 1.5}],
        {"long": "x" * 5000},
    ],
)
@pytest.mark.parametrize("salt", [PREFERENCE_CENTER_SALT, UNSUBSCRIBE_SALT, "another.salt"])
@pytest.mark.parametrize("key", [OLD_KEY, NEW_KEY, "ünïcode-key-" * 8])
def test_signed_dumps_writes_what_django_signing_dumps_writes(settings, value, salt, key):
    settings.SECRET_KEY = key
    with mock.patch("time.time", return_value=NOW):
        assert signed_dumps(value, salt=salt) == signing.dumps(value, salt=salt)
    assert signing.loads(signed_dumps(value, salt=salt), salt=salt) == value


def test_the_tokens_are_djangos_strings_and_read_back_through_the_fallbacks(settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD_KEY, []
    with mock.patch("time.time", return_value=NOW):
        center = preference_center_token(recipient_id=42, now_us=123)
        link = unsubscribe_token(recipient_id=42, category_id=7, channel="email")
        user = user_token_issue(recipient_id=42)
        assert center == signing.dumps({"r": 42, "i": 123}, salt=PREFERENCE_CENTER_SALT)
        assert link == signing.dumps({"r": 42, "c": 7, "ch": "email"}, salt=UNSUBSCRIBE_SALT)
        assert user == USER_TOKEN_PREFIX + signing.dumps({"r": 42}, salt=USER_TOKEN_SALT)

    # After a rotation, new values are signed with the new key; old ones read back
    # through the fallback, and only while it is one.
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_KEY, [OLD_KEY]
    fresh = preference_center_token(recipient_id=42, now_us=123)
    assert fresh != center
    for token in (center, fresh):
        assert signing.loads(token, salt=PREFERENCE_CENTER_SALT) == {"r": 42, "i": 123}
    settings.SECRET_KEY_FALLBACKS = []
    with pytest.raises(signing.BadSignature):
        signing.loads(center, salt=PREFERENCE_CENTER_SALT)
    assert signing.loads(fresh, salt=PREFERENCE_CENTER_SALT) == {"r": 42, "i": 123}


@pytest.mark.parametrize("key", [OLD_KEY, "ünïcode-key-" * 8, "k" * 200])
def test_a_gate_seal_is_the_plain_hmac_of_its_delivery(settings, key):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = key, []
    message = b"n-1|email|a@example.com"
    sealed = {"notification_id": "n-1", "channel": "email", "target": "a@example.com"}
    seal = hmac.new(key.encode(), message, hashlib.sha256).hexdigest()
    test_seal = hmac.new(f"template-test-send:{key}".encode(), message, hashlib.sha256)
    assert gate.gate_seal(**sealed) == seal
    assert gate.test_send_seal(**sealed) == test_seal.hexdigest()
    assert gate.gate_seal_valid(**sealed, seal=seal)
    assert gate.test_send_sealed(**sealed, seal=test_seal.hexdigest())
    assert not gate.test_send_sealed(**sealed, seal=seal)
    assert not gate.gate_seal_valid(**{**sealed, "target": "b@example.com"}, seal=seal)
