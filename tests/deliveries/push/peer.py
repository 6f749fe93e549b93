"""A local Web Push service: what a browser vendor's push endpoint does, for real.

It checks the VAPID JWT (ES256 signature with the key in `k=`, `aud` = this origin,
`exp` in the future) and decrypts the aes128gcm body with the subscriber's private key,
exactly as the browser would. Each subscription can be told what to answer next, and
whether the connection that carried its answer is let go (see `hang_up_after_answer`).
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import http_ece
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from tests.peers.base import BurstServer, LoopbackHttpPeer


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class Subscriber:
    """A browser's push subscription: its own key pair and auth secret."""

    name: str
    private_key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def p256dh(self) -> str:
        raw = self.private_key.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64url(raw)


@dataclass
class Received:
    """One push the service accepted or refused, as the subscriber would see it."""

    at: float
    subscriber: str
    status: int
    headers: dict[str, str]
    claims: dict
    vapid_key: str
    payload: bytes | None
    error: str = ""

    def json(self) -> dict:
        return json.loads(self.payload.decode())


class PushService(LoopbackHttpPeer):
    def __init__(self) -> None:
        self.subscribers: dict[str, Subscriber] = {}
        self.scripts: dict[str, list[tuple[int, dict[str, str]]]] = {}
        self.received: list[Received] = []
        self.slow: dict[str, float] = {}  # seconds a subscription's requests hang
        self.in_flight: dict[str, int] = {}
        self.most_in_flight: dict[str, int] = {}  # by subscriber-name prefix
        self.hang_ups: set[str] = set()  # subscriptions whose answer ends its connection
        self.hung_up = 0  # requests that reached a connection the service had let go
        self.silences: set[str] = set()  # subscriptions whose answer leaves it half-dead
        self.connections = 0  # connections accepted since the last reset
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        # The port tests/settings.py lists in WEBPUSH_ALLOWED_ORIGINS.
        port = int(os.environ.get("NOTIFY_TEST_PUSH_PORT", "0"))
        self.serve(self._handler(), port=port, server_class=BurstServer)

    def stop(self) -> None:
        self.stopping.set()
        super().stop()

    def reset(self) -> None:
        with self.lock:
            self.subscribers.clear()
            self.scripts.clear()
            self.received.clear()
            self.slow.clear()
            self.in_flight.clear()
            self.most_in_flight.clear()
            self.hang_ups.clear()
            self.hung_up = 0
            self.silences.clear()
            self.connections = 0

    def subscribe(self, name: str) -> tuple[Subscriber, dict]:
        """A new subscription; returns it and the body a browser would register."""
        subscriber = Subscriber(name)
        with self.lock:
            self.subscribers[name] = subscriber
        body = {
            "kind": "webpush",
            "endpoint": f"{self.origin}/push/{name}",
            "keys": {"p256dh": subscriber.p256dh, "auth": b64url(subscriber.auth)},
        }
        return subscriber, body

    def answer(self, name: str, *responses: tuple[int, dict[str, str]]) -> None:
        """The next answers for this subscription, in order; 201 once they run out."""
        with self.lock:
            self.scripts.setdefault(name, []).extend(responses)

    def answer_after(self, group: str, seconds: float) -> None:
        """From now on, answer every request to the subscriptions named `group` or
        `group.<anything>` after `seconds` (a push service under load); the requests
        meanwhile are read and held, and `most_in_flight[group]` counts them."""
        with self.lock:
            self.slow[group] = seconds

    def hang_up_after_answer(self, name: str) -> None:
        """From now on, the connection that carries an answer for this subscription is
        let go once the answer is out, without `Connection: close`: the next request
        sent on it is met by a close and not a byte of answer. That is a server's idle
        close crossing the client's next request, the one case the client's check of
        its pooled connections cannot see (the close is not there yet when it looks)."""
        with self.lock:
            self.hang_ups.add(name)

    def go_silent_after_answer(self, name: str) -> None:
        """From now on, the connection that carries an answer for this subscription goes
        half-dead once the answer is out: open, never closed, never reading or answering
        again, as a connection a NAT or load balancer forgot looks from the client."""
        with self.lock:
            self.silences.add(name)

    def deliveries_to(self, name: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.subscriber == name]

    def accepted_for(self, name: str) -> list[Received]:
        return [r for r in self.deliveries_to(name) if 200 <= r.status < 300]

    # --- the HTTP side ---------------------------------------------------------------

    def _handler(self):
        service = self

        class Handler(BaseHTTPRequestHandler):
            # Connections stay open between pushes, as a real push service keeps them.
            protocol_version = "HTTP/1.1"
            let_go = False  # this connection's last answer was followed by a hang-up
            silent = False  # this connection's last answer left it half-dead

            def log_message(self, *args) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                with service.lock:
                    service.connections += 1

            def handle_one_request(self) -> None:
                if self.silent:
                    service.stopping.wait(60)
                    self.close_connection = True
                    return
                if not self.let_go:
                    super().handle_one_request()
                    return
                # Wait for the next request (or the client's own close), then close
                # without answering: nothing of that request is processed.
                if self.rfile.readline(65537):
                    with service.lock:
                        service.hung_up += 1
                self.close_connection = True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                name = self.path.rsplit("/", 1)[-1]
                group = name.split(".", 1)[0]  # "owner.device3" counts under "owner"
                with service.lock:
                    service.in_flight[group] = service.in_flight.get(group, 0) + 1
                    service.most_in_flight[group] = max(
                        service.most_in_flight.get(group, 0), service.in_flight[group]
                    )
                try:
                    time.sleep(service.slow.get(group, 0.0))
                    status, extra, record = service._receive(name, dict(self.headers), body)
                finally:
                    with service.lock:
                        service.in_flight[group] -= 1
                with service.lock:
                    service.received.append(record)
                self.send_response(status)
                for key, value in extra.items():
                    self.send_header(key, value)
                if 200 <= status < 300:
                    self.send_header("Location", f"{service.origin}/msg/{len(service.received)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                with service.lock:
                    self.let_go = name in service.hang_ups
                    self.silent = name in service.silences

        return Handler

    def _receive(self, name: str, headers: dict[str, str], body: bytes):
        headers = {k.lower(): v for k, v in headers.items()}
        claims: dict = {}
        key = ""
        try:
            claims, key = self._verify_vapid(headers.get("authorization", ""))
            subscriber = self.subscribers[name]
        except Exception as error:  # refused like a real service: 401/404, recorded
            status = 404 if isinstance(error, KeyError) else 401
            record = Received(time.time(), name, status, headers, claims, key, None, repr(error))
            return status, {}, record
        with self.lock:
            script = self.scripts.get(name) or []
            status, extra = script.pop(0) if script else (201, {})
        payload = None
        if 200 <= status < 300:
            assert headers.get("content-encoding") == "aes128gcm", headers
            payload = http_ece.decrypt(
                body,
                private_key=subscriber.private_key,
                auth_secret=subscriber.auth,
                version="aes128gcm",
            )
        record = Received(time.time(), name, status, headers, claims, key, payload)
        return status, extra, record

    def _verify_vapid(self, authorization: str) -> tuple[dict, str]:
        scheme, _, params = authorization.partition(" ")
        if scheme.lower() != "vapid":
            raise ValueError(f"not a VAPID authorization: {authorization!r}")
        values = dict(part.strip().split("=", 1) for part in params.split(","))
        token, key = values["t"], values["k"]
        header_b64, claims_b64, signature_b64 = token.split(".")
        header = json.loads(unb64url(header_b64))
        if header.get("alg") != "ES256":
            raise ValueError(f"JWT alg {header.get('alg')!r}")
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
        raw = unb64url(signature_b64)
        signature = encode_dss_signature(
            int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
        )
        try:
            public.verify(
                signature, f"{header_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256())
            )
        except InvalidSignature:
            raise ValueError("VAPID JWT signature does not verify") from None
        claims = json.loads(unb64url(claims_b64))
        if claims.get("aud") != self.origin:
            raise ValueError(f"aud {claims.get('aud')!r} is not {self.origin!r}")
        if int(claims.get("exp", 0)) <= time.time():
            raise ValueError("VAPID JWT expired")
        if not str(claims.get("sub", "")).startswith(("mailto:", "https:")):
            raise ValueError("VAPID JWT has no sub")
        return claims, key
