"""How a process reaches the store: the same SQL on every path.

- A ClickHouse server or cluster (NOTIFY_ANALYTICS_CLICKHOUSE_URL): clickhouse-connect
  over HTTP, from any process.
- Embedded (the default): chDB, ClickHouse's engine in this process, on
  NOTIFY_ANALYTICS_DATA_DIR. chDB lets one process open a data directory, so the
  `analytics` process owns it: it ships into it and answers the other processes' reads
  over a loopback socket (`analytics.store.reader`), each request signed with SECRET_KEY.
  With NOTIFY_ANALYTICS_READER_ADDRESS empty this process opens the directory itself.

Queries take `{name:Type}` parameters, which both chDB and a server bind themselves.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import urllib.request
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from django.conf import settings

# A read from another process gives up after this long (a report is sub-second; the
# analytics process being down must not hang a web worker).
READER_TIMEOUT_SECONDS = 15.0


class Store(Protocol):
    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]: ...

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None: ...

    def insert_csv(self, table: str, columns: Sequence[str], chunks: Iterable[bytes]) -> None: ...


class EmbeddedStore:
    """chDB in this process. Its queries run one at a time (the shipper's inserts and the
    reader's reports share one session)."""

    def __init__(self, path: str) -> None:
        from chdb import session  # only the process that owns the directory loads chDB

        self.path = path
        self.session = session.Session(path)
        self.lock = threading.Lock()

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
        with self.lock:
            result = self.session.query(sql, "JSONCompact", params=params or None)
        text = result.bytes() if hasattr(result, "bytes") else bytes(result)
        if not text.strip():
            return []
        return [tuple(row) for row in json.loads(text)["data"]]

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        with self.lock:
            self.session.query(sql, "CSV", params=params or None)

    def insert_csv(self, table: str, columns: Sequence[str], chunks: Iterable[bytes]) -> None:
        with self.lock:
            inserter = self.session.send_insert(f"INSERT INTO {table} ({', '.join(columns)})")
            try:
                for chunk in chunks:
                    inserter.append(chunk)
            except BaseException:
                inserter.cancel()
                raise
            inserter.finish()


class ServerStore:
    """A ClickHouse server (or a cluster's load balancer) through clickhouse-connect."""

    def __init__(self, url: str) -> None:
        import clickhouse_connect

        self.client = clickhouse_connect.get_client(dsn=url)

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
        return [tuple(row) for row in self.client.query(sql, parameters=params).result_rows]

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        self.client.command(sql, parameters=params)

    def insert_csv(self, table: str, columns: Sequence[str], chunks: Iterable[bytes]) -> None:
        self.client.raw_insert(table, list(columns), insert_block=b"".join(chunks), fmt="CSV")


def request_signature(body: bytes) -> str:
    """What a read request to the analytics process is signed with."""
    key = hashlib.sha256(f"{settings.SECRET_KEY}:analytics-reader".encode()).digest()
    return hmac.new(key, body, hashlib.sha256).hexdigest()


class ReaderClient:
    """Reads from the `analytics` process that owns the embedded store."""

    def __init__(self, address: str) -> None:
        self.url = f"http://{address}/query"

    def query(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple]:
        body = json.dumps({"sql": sql, "params": params or {}}, default=str).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            headers={"Content-Type": "application/json", "X-Signature": request_signature(body)},
        )
        with urllib.request.urlopen(request, timeout=READER_TIMEOUT_SECONDS) as answer:
            return [tuple(row) for row in json.loads(answer.read())["rows"]]

    def command(self, sql: str, params: dict[str, Any] | None = None) -> None:
        raise RuntimeError("only the analytics process writes to the embedded store")

    def insert_csv(self, table: str, columns: Sequence[str], chunks: Iterable[bytes]) -> None:
        raise RuntimeError("only the analytics process writes to the embedded store")


_stores: dict[str, Store] = {}


def store_open(*, owner: bool = False) -> Store:
    """This process's way to the store. `owner`: the analytics process, which writes (and,
    embedded, opens the data directory); any other process reads."""
    if settings.NOTIFY_ANALYTICS_CLICKHOUSE_URL:
        key = "server"
        if key not in _stores:
            _stores[key] = ServerStore(settings.NOTIFY_ANALYTICS_CLICKHOUSE_URL)
    elif owner or not settings.NOTIFY_ANALYTICS_READER_ADDRESS:
        key = "embedded"
        if key not in _stores:
            from analytics.store.schema import schema_ensure

            _stores[key] = EmbeddedStore(settings.NOTIFY_ANALYTICS_DATA_DIR)
            schema_ensure(_stores[key])  # a store opened here may be new
    else:
        key = "reader"
        if key not in _stores:
            _stores[key] = ReaderClient(settings.NOTIFY_ANALYTICS_READER_ADDRESS)
    return _stores[key]


def stores_forget() -> None:
    """Forget this process's way to the store (after its settings changed)."""
    _stores.pop("reader", None)
    _stores.pop("server", None)
