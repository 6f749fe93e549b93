"""The embedded store's reader: the `analytics` process answers other processes' report
queries on a loopback socket (NOTIFY_ANALYTICS_READER_ADDRESS).

chDB lets one process open a data directory, and that process must be the shipper (it
writes). A web process therefore sends its query here: signed with SECRET_KEY (only
Notify's own processes can ask), read-only (a SELECT), answered as JSON. A report reads
the rollups and takes milliseconds, so the shipper, whose inserts take turns with
these reads on the one session, waits at most that long.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from analytics.store.backend import EmbeddedStore, request_signature

logger = logging.getLogger(__name__)

# A query body larger than this is refused (ours are a few hundred bytes).
MAX_REQUEST_BYTES = 64 * 1024


def _handler(store: EmbeddedStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/query" or not 0 < length <= MAX_REQUEST_BYTES:
                self._answer(400, {"error": "bad request"})
                return
            body = self.rfile.read(length)
            signature = self.headers.get("X-Signature", "")
            if not hmac.compare_digest(signature, request_signature(body)):
                self._answer(403, {"error": "bad signature"})
                return
            request = json.loads(body)
            sql = str(request.get("sql", ""))
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                self._answer(400, {"error": "read-only"})
                return
            try:
                rows = store.query(sql, request.get("params") or None)
            except Exception as error:  # the caller gets the engine's words
                logger.exception("analytics reader: query failed")
                self._answer(500, {"error": str(error)[:2000]})
                return
            self._answer(200, {"rows": rows})

        def _answer(self, status: int, document: dict) -> None:
            body = json.dumps(document, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            logger.debug(format, *args)

    return Handler


def reader_start(*, store: EmbeddedStore, address: str) -> ThreadingHTTPServer:
    """Serve reads of `store` on `address` (host:port) from a daemon thread."""
    host, _, port = address.rpartition(":")
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port)), _handler(store))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="analytics-reader", daemon=True).start()
    return server
