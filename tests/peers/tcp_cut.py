"""A TCP relay in front of a server that a test can cut: every open connection drops at
once (as when a proxy or a network path fails), and new ones wait, accepted but not
answered, until the test lets them through."""

from __future__ import annotations

import contextlib
import socket
import threading


class CuttableRelay:
    """Listens on a free loopback port and relays each connection to `upstream_port`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._waiting: list[socket.socket] = []
        self._holding = False
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Drop every open connection; new ones wait until `restore`."""
        with self._lock:
            self._holding = True
            dropped, self._open = self._open, []
        for sock in dropped:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        """Relay again, starting with the connections that waited."""
        with self._lock:
            self._holding = False
            waiting, self._waiting = self._waiting, []
        for client in waiting:
            self._relay(client)

    def stop(self) -> None:
        self._stopped = True
        self._listener.close()
        self.cut()
        for client in self._waiting:
            client.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._holding:
                    self._waiting.append(client)
                    continue
            self._relay(client)

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except OSError:
            client.close()
            return
        with self._lock:
            self._open += [client, upstream]
        for source, target in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
