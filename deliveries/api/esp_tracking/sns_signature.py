"""Amazon SNS message signatures: every message SNS posts (a notification, a subscription
or unsubscribe confirmation) is signed with the private key of a certificate SNS
publishes at the message's `SigningCertURL`; we check the signature before anything in
the message is believed.

The signed text is the message's fields, each as its name, a newline, its value and a
newline, in a fixed order per type (Subject only when present); SignatureVersion 1 signs
it RSA with SHA-1, version 2 RSA with SHA-256 (PKCS#1 v1.5 both). The certificate is
fetched only from Amazon SNS itself (`https://sns.<region>.amazonaws.com[.cn]/….pem`,
no credentials, the default port) over verified TLS, and kept in this process: SNS
signs with few certificates, and a new one comes at a new URL. Tests serve theirs from
a loopback peer, which only a test setting allows.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
import re
import threading
from collections import OrderedDict
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from django.conf import settings

from egress.sessions import bounded_session

logger = logging.getLogger(__name__)

SNS_HOST = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")
# The fields each kind of message signs, in order.
SIGNED_FIELDS = {
    "Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
    "SubscriptionConfirmation": (
        "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
    ),
    "UnsubscribeConfirmation": (
        "Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type",
    ),
}  # fmt: skip
HASHES = {"1": hashes.SHA1, "2": hashes.SHA256}
# Certificates kept per process: SNS signs each region's topics with one at a time.
CERTIFICATES_KEPT = 16


class SignatureRefused(Exception):
    """The message's signature does not hold (or cannot be checked)."""


def signing_text(message: dict) -> bytes:
    """The text SNS signs for this message (its type decides the fields)."""
    fields = SIGNED_FIELDS.get(str(message.get("Type")))
    if fields is None:
        raise SignatureRefused(f"unknown SNS message type {message.get('Type')!r}")
    lines = []
    for name in fields:
        if name not in message:
            if name == "Subject":  # signed only when present
                continue
            raise SignatureRefused(f"SNS message without {name}")
        lines.append(f"{name}\n{message[name]}\n")
    return "".join(lines).encode()


def sns_url_allowed(url: str) -> bool:
    """Whether a URL in an SNS message (SubscribeURL, SigningCertURL) is Amazon SNS's
    own: https, sns.<region>.amazonaws.com, no credentials, the default port. The only
    kind we ever fetch."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "https"
        and port in (None, 443)
        and not parts.username
        and not parts.password
        and bool(SNS_HOST.fullmatch(parts.hostname or ""))
    )


def cert_url_allowed(url: str) -> bool:
    """Whether a SigningCertURL is SNS's own (`sns_url_allowed`) and a .pem: the only
    certificates we fetch. A test setting (NOTIFY_SNS_TEST_CERTS_ON_LOOPBACK) also lets
    a loopback peer serve them."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.username or parts.password or not parts.path.endswith(".pem"):
        return False
    if getattr(settings, "NOTIFY_SNS_TEST_CERTS_ON_LOOPBACK", False) and _loopback(parts.hostname):
        return parts.scheme in ("http", "https")
    return sns_url_allowed(url)


def sns_signature_verify(message: dict) -> None:
    """Raise `SignatureRefused` unless the message carries a valid SNS signature."""
    version = str(message.get("SignatureVersion", ""))
    digest = HASHES.get(version)
    if digest is None:
        raise SignatureRefused(f"unsupported SignatureVersion {version!r}")
    try:
        signature = base64.b64decode(str(message.get("Signature", "")), validate=True)
    except (binascii.Error, ValueError):
        raise SignatureRefused("the signature is not base64") from None
    url = str(message.get("SigningCertURL", ""))
    if not cert_url_allowed(url):
        raise SignatureRefused(f"SigningCertURL {url[:200]!r} is not Amazon SNS's")
    key = _public_key(url)
    try:
        key.verify(signature, signing_text(message), padding.PKCS1v15(), digest())
    except InvalidSignature:
        raise SignatureRefused("the signature does not match the message") from None


_lock = threading.Lock()
_keys: OrderedDict[str, rsa.RSAPublicKey] = OrderedDict()


def _public_key(url: str) -> rsa.RSAPublicKey:
    """The RSA key of the certificate at `url`, fetched once per process."""
    with _lock:
        if url in _keys:
            _keys.move_to_end(url)
            return _keys[url]
    session = bounded_session(
        settings.NOTIFY_ESP_CALL_DEADLINE, settings.NOTIFY_ESP_MAX_RESPONSE_BYTES
    )
    try:
        answer = session.get(url)
    except Exception as error:  # network, TLS, the deadline: not checkable now
        raise SignatureRefused(f"signing certificate not fetched: {error}") from None
    if answer.status_code != 200:
        raise SignatureRefused(f"signing certificate not fetched: HTTP {answer.status_code}")
    try:
        key = x509.load_pem_x509_certificate(answer.content).public_key()
    except ValueError:
        raise SignatureRefused("the signing certificate is not a PEM certificate") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise SignatureRefused("the signing certificate's key is not RSA")
    with _lock:
        _keys[url] = key
        while len(_keys) > CERTIFICATES_KEPT:
            _keys.popitem(last=False)
    logger.info("SNS signing certificate %s fetched", url)
    return key


def certificates_forget() -> None:
    """Forget the kept certificates (a test starting afresh)."""
    with _lock:
        _keys.clear()


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False
