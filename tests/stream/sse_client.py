"""A minimal Server-Sent Events client reading a real stream in a background thread."""

from __future__ import annotations

import json
import threading

import httpx


class SseClient:
    def __init__(self, url: str, *, headers: dict[str, str]) -> None:
        self.url = url
        self.headers = headers
        self.events: list[dict] = []
        self.comments: list[str] = []
        self.status: int | None = None
        self._response: httpx.Response | None = None
        self._client = httpx.Client(timeout=httpx.Timeout(10.0, read=None))
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SseClient:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            with self._client.stream("GET", self.url, headers=self.headers) as response:
                self._response = response
                self.status = response.status_code
                event: dict = {}
                for line in response.iter_lines():
                    if line.startswith(":"):
                        self.comments.append(line[1:].strip())
                    elif line.startswith("id:"):
                        event["id"] = line[3:].strip()
                    elif line.startswith("data:"):
                        event["data"] = json.loads(line[5:].strip())
                    elif line == "" and "data" in event:
                        self.events.append(event)
                        event = {}
        except (httpx.HTTPError, RuntimeError, ValueError):
            pass  # closed by stop()

    def stop(self) -> None:
        if self._response is not None:
            self._response.close()
        self._client.close()
        self._thread.join(timeout=5)
