"""What every protocol peer over HTTP shares: a threading HTTP server on loopback, served
from a thread of its own, started and stopped by the test. A peer (email providers,
status-webhook receivers, Web Push, FCM) brings its own handler class and keeps what it
was sent."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class BurstServer(ThreadingHTTPServer):
    """A server for bursts: hundreds of concurrent requests queue instead of being
    refused, and its request threads never hold the process up at exit."""

    request_queue_size = 1024
    daemon_threads = True


class LoopbackHttpPeer:
    """An HTTP server on loopback (`port` 0: any free one) in a daemon thread."""

    def serve(
        self,
        handler: type[BaseHTTPRequestHandler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer,
    ) -> None:
        """Bind the server (call once, from the peer's __init__)."""
        self.server = server_class((host, port), handler)
        self.host = host
        self.port = self.server.server_address[1]
        self.origin = f"http://{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
