"""A local FCM: the OAuth token endpoint of a service account and the v1 send API.

It checks the service account's signed assertion (RS256) before handing out an access
token, checks that token on every send, and answers each registration token as told:
success, UNREGISTERED, INVALID_ARGUMENT or 429 quota with Retry-After — in the error
format the real FCM v1 API uses, so firebase-admin parses it as it would in production.
Like the Web Push peer, it can let a connection go once it has answered a token
(`hang_up_after_answer`).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.peers.base import BurstServer, LoopbackHttpPeer

PROJECT = "notify-test"
_FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class FcmService(LoopbackHttpPeer):
    def __init__(self, directory: Path) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.access_token = secrets.token_urlsafe(24)
        self.answers: dict[str, tuple[int, str, dict[str, str]]] = {}
        self.sends: list[dict] = []
        self.token_requests = 0
        self.hang_ups: set[str] = set()  # tokens whose answer ends its connection
        self.hung_up = 0  # requests that reached a connection the service had let go
        self.lock = threading.Lock()
        self.serve(self._handler(), server_class=BurstServer)
        self.send_url = self.origin + "/v1/projects/{project_id}/messages:send"
        self.credentials_path = directory / "fcm-service-account.json"
        self.credentials_path.write_text(json.dumps(self._service_account()))

    def _service_account(self) -> dict:
        pem = self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "test-key-1",
            "private_key": pem,
            "client_email": f"notify@{PROJECT}.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": f"{self.origin}/token",
        }

    def reset(self) -> None:
        with self.lock:
            self.answers.clear()
            self.sends.clear()
            self.hang_ups.clear()
            self.hung_up = 0

    def answer(self, token: str, status: int, code: str, headers: dict[str, str] | None = None):
        """How to answer sends to this registration token from now on."""
        with self.lock:
            self.answers[token] = (status, code, headers or {})

    def hang_up_after_answer(self, token: str) -> None:
        """The connection that carries an answer for this token is let go, without
        `Connection: close`: the next request sent on it meets a close and no answer
        (see tests/deliveries/push/peer.py's method of the same name)."""
        with self.lock:
            self.hang_ups.add(token)

    def sends_to(self, token: str) -> list[dict]:
        with self.lock:
            return [s for s in self.sends if s["message"].get("token") == token]

    def _handler(self):
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            let_go = False  # this connection's last answer was followed by a hang-up

            def log_message(self, *args) -> None:
                pass

            def handle_one_request(self) -> None:
                if not self.let_go:
                    super().handle_one_request()
                    return
                if self.rfile.readline(65537):  # the next request: closed, unanswered
                    with service.lock:
                        service.hung_up += 1
                self.close_connection = True

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path == "/token":
                    status, data = service._token(body)
                    self._reply(status, data, {})
                    return
                status, data, extra = service._send(self.path, self.headers, body)
                self._reply(status, data, extra)
                with service.lock:
                    self.let_go = _registration_token(body) in service.hang_ups

            def _reply(self, status: int, data: dict, extra: dict[str, str]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for key, value in extra.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(raw)

        return Handler

    def _token(self, body: bytes) -> tuple[int, dict]:
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        header_b64, claims_b64, signature_b64 = form["assertion"].split(".")
        try:
            self.key.public_key().verify(
                _unb64url(signature_b64),
                f"{header_b64}.{claims_b64}".encode(),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except Exception:
            return 400, {"error": "invalid_grant"}
        claims = json.loads(_unb64url(claims_b64))
        # google-auth always addresses its assertion to Google's token endpoint.
        audience = "https://oauth2.googleapis.com/token"
        if claims.get("aud") != audience or claims.get("exp", 0) < time.time():
            return 400, {"error": "invalid_grant"}
        with self.lock:
            self.token_requests += 1
        return 200, {"access_token": self.access_token, "expires_in": 3600, "token_type": "Bearer"}

    def _send(self, path: str, headers, body: bytes) -> tuple[int, dict, dict[str, str]]:
        if headers.get("Authorization") != f"Bearer {self.access_token}":
            return 401, _error(401, "UNAUTHENTICATED", ""), {}
        if path != f"/v1/projects/{PROJECT}/messages:send":
            return 404, _error(404, "NOT_FOUND", ""), {}
        message = json.loads(body)["message"]
        with self.lock:
            self.sends.append({"at": time.time(), "message": message})
            status, code, extra = self.answers.get(message.get("token"), (200, "", {}))
            number = len(self.sends)
        if status == 200:
            return 200, {"name": f"projects/{PROJECT}/messages/{number}"}, {}
        canonical = {404: "NOT_FOUND", 400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}
        return status, _error(status, canonical.get(status, "INTERNAL"), code), extra


def _registration_token(body: bytes) -> str | None:
    try:
        return json.loads(body)["message"].get("token")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _error(status: int, canonical: str, fcm_code: str) -> dict:
    error: dict = {
        "code": status,
        "message": f"{canonical} {fcm_code}".strip(),
        "status": canonical,
    }
    if fcm_code:
        error["details"] = [{"@type": _FCM_ERROR, "errorCode": fcm_code}]
    return {"error": error}
