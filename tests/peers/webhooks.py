"""A producer's webhook receiver on loopback: records every post, answers as told.

`answer` is the status it gives (204 while up; 503 while "down"), after `delay`
seconds; `received` keeps
(status answered, headers, body) of every post, in arrival order.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler

from tests.peers.base import LoopbackHttpPeer


class WebhookReceiver(LoopbackHttpPeer):
    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.port = port
        self.host = host  # any loopback address (127.0.0.0/8)
        self.answer = 204
        self.delay = 0.0  # seconds before each answer (a slow receiver)
        self.received: list[tuple[int, dict[str, str], bytes]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver.lock:
                    status = receiver.answer
                    receiver.received.append((status, dict(self.headers.items()), body))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.serve(Handler, host=host, port=port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hooks"

    def reset(self) -> None:
        with self.lock:
            self.answer = 204
            self.received.clear()

    def accepted(self) -> list[tuple[dict[str, str], bytes]]:
        """The posts it took (answered 2xx)."""
        with self.lock:
            return [(h, b) for status, h, b in self.received if 200 <= status < 300]


def main() -> None:
    """`python -m tests.peers.webhooks PORT DELAY`: a receiver in a process of its own (the
    bench runs it niced, as a receiver on another host would cost our hosts nothing)."""
    import sys

    peer = WebhookReceiver(int(sys.argv[1]))
    peer.delay = float(sys.argv[2])
    peer.received = _Counted()  # a long run keeps no bodies
    peer.server.serve_forever()


class _Counted(list):
    def append(self, item) -> None:
        pass


if __name__ == "__main__":
    main()
