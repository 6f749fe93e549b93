"""A hostile peer: it accepts a connection and answers one byte every few moments,
forever, so that no per-read timeout ever fires (HTTP endpoints, SMTP relays)."""

from __future__ import annotations

import socket
import threading


class DripPeer:
    """Drips `answer` one byte every `every` seconds to each connection.

    `reads_first`: wait for the client's request before answering (HTTP); an SMTP relay
    speaks first. `cut_off` is set when a client hangs up on it mid-answer.
    """

    def __init__(self, answer: bytes, *, every: float, reads_first: bool) -> None:
        self.answer = answer
        self.every = every
        self.reads_first = reads_first
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.stopped = threading.Event()
        self.cut_off = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            if self.reads_first:
                conn.recv(65536)  # the request; its content does not matter
            for byte in self.answer:
                if self.stopped.wait(self.every):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    self.cut_off.set()
                    return

    def stop(self) -> None:
        self.stopped.set()
        self.listener.close()
