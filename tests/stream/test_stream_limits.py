"""The live stream's bounds, against the ASGI app under uvicorn as deployed: open streams
per user and per key, a maximum lifetime with jittered reconnect advice, and the
re-authentication of every reconnect."""

from __future__ import annotations

import contextlib
import time

import httpx
import pytest
from django.utils import timezone

from notify.models import ApiKey, Recipient
from notify.tokens import user_token_issue
from tests.stream.server import asgi_process

pytestmark = pytest.mark.e2e

STREAM_SETTINGS = {
    "NOTIFY_STREAM_MAX_PER_USER": "2",
    "NOTIFY_STREAM_MAX_PER_KEY": "3",
    "NOTIFY_STREAM_HEARTBEAT": "0.5",
    "NOTIFY_STREAM_RETRY_MS": "3000",
    "NOTIFY_STREAM_RETRY_JITTER": "0.5",
}


@pytest.fixture(scope="module")
def long_lived_streams(worker_env):
    with asgi_process(worker_env, {**STREAM_SETTINGS, "NOTIFY_STREAM_MAX_LIFETIME": "600"}) as url:
        yield url


@pytest.fixture(scope="module")
def short_lived_streams(worker_env):
    with asgi_process(worker_env, {**STREAM_SETTINGS, "NOTIFY_STREAM_MAX_LIFETIME": "2"}) as url:
        yield url


def stream_url(server: str, user_id: str) -> str:
    return f"{server}/v1/users/{user_id}/stream"


def test_a_user_and_a_key_hold_at_most_their_share_of_open_streams(
    transactional_db, producer_key, long_lived_streams
):
    for n in range(4):
        Recipient.objects.create(user_id=f"streams-{n}")
    headers = {"Authorization": f"Bearer {producer_key.key}"}
    with (
        httpx.Client(timeout=httpx.Timeout(10.0, read=None)) as client,
        contextlib.ExitStack() as held,
    ):

        def hold(user_id: str) -> httpx.Response:
            url = stream_url(long_lived_streams, user_id)
            return held.enter_context(client.stream("GET", url, headers=headers))

        first, second = hold("streams-0"), hold("streams-0")
        assert (first.status_code, second.status_code) == (200, 200)
        third = client.get(stream_url(long_lived_streams, "streams-0"), headers=headers)
        assert third.status_code == 429
        assert third.json()["error"]["code"] == "too_many_streams"
        assert "user" in third.json()["error"]["message"]
        assert int(third.headers["Retry-After"]) >= 1

        # The key now holds 3 streams (2 + 1): its limit, whichever user asks next.
        assert hold("streams-1").status_code == 200
        by_key = client.get(stream_url(long_lived_streams, "streams-2"), headers=headers)
        assert by_key.status_code == 429
        assert "API key" in by_key.json()["error"]["message"]

        # A closed stream gives its place back at once.
        first.close()
        deadline = time.monotonic() + 15
        while True:
            again = hold("streams-0")
            if again.status_code == 200:
                break
            assert time.monotonic() < deadline, "the closed stream's place was never freed"
            again.close()
            time.sleep(0.1)


def read_until_the_server_ends(response: httpx.Response, *, limit: float = 30.0) -> list[str]:
    """Every line of the stream; fails instead of hanging when the server never ends it."""
    started = time.monotonic()
    lines = []
    for line in response.iter_lines():  # heartbeats arrive every 0.5 s
        lines.append(line)
        assert time.monotonic() - started < limit, "the stream outlived its lifetime"
    return lines


def test_a_stream_ends_at_its_lifetime_with_jittered_advice_and_the_reconnect_is_reauthenticated(
    transactional_db, producer_key, short_lived_streams
):
    Recipient.objects.create(user_id="lifetime-1")
    headers = {"Authorization": f"Bearer {producer_key.key}"}
    url = stream_url(short_lived_streams, "lifetime-1")
    advice = []
    with httpx.Client(timeout=httpx.Timeout(10.0, read=None)) as client:
        for _ in range(3):  # the client reconnects each time the server ends the stream
            with client.stream("GET", url, headers=headers) as response:
                assert response.status_code == 200
                lines = read_until_the_server_ends(response)
            retries = [int(line.split(":", 1)[1]) for line in lines if line.startswith("retry:")]
            assert len(retries) == 2  # on opening, and the advice it ends with
            assert any("reconnect" in line for line in lines if line.startswith(":"))
            advice.extend(retries)
        # 3000 ms ± 50 %, and not one value for everybody.
        assert all(1500 <= value <= 4500 for value in advice)
        assert len(set(advice)) > 1

        # The key is revoked while its stream is open: the reconnect is refused.
        with client.stream("GET", url, headers=headers) as response:
            ApiKey.objects.filter(pk=producer_key.api_key.pk).update(revoked_at=timezone.now())
            read_until_the_server_ends(response)
        refused = client.get(url, headers=headers)
        assert refused.status_code == 401


def test_garbage_stream_headers_and_parameters_are_refused_with_400(
    transactional_db, producer_key, long_lived_streams
):
    Recipient.objects.create(user_id="garbage-1")
    headers = {"Authorization": f"Bearer {producer_key.key}"}
    url = stream_url(long_lived_streams, "garbage-1")
    with httpx.Client(timeout=10.0) as client:
        for extra, params in (
            ({"Last-Event-ID": "1; DROP TABLE"}, {}),
            ({"Last-Event-ID": "9" * 40}, {}),
            ({}, {"device_id": "abc"}),
            ({}, {"device_id": "-1"}),
        ):
            answer = client.get(url, headers={**headers, **extra}, params=params)
            assert answer.status_code == 400, (extra, params, answer.text)
            assert answer.json()["error"]["code"] == "invalid"


def test_open_streams_are_not_bounded_by_the_database_pool(transactional_db, worker_env):
    # A pool of 2 with a short wait: open streams must not keep a connection each, or
    # the third would wait for the pool and then fail with a 500.
    people = [Recipient.objects.create(user_id=f"pooled-{n}") for n in range(5)]
    pool = {"DATABASE_POOL_MAX_SIZE": "2", "DATABASE_POOL_TIMEOUT": "2"}
    with (
        asgi_process(worker_env, {**STREAM_SETTINGS, **pool}) as server,
        httpx.Client(timeout=httpx.Timeout(10.0, read=None)) as client,
        contextlib.ExitStack() as held,
    ):
        for person in people:
            token = user_token_issue(recipient_id=person.pk)
            opened = held.enter_context(
                client.stream(
                    "GET",
                    stream_url(server, person.user_id),
                    headers={"Authorization": f"Bearer {token}"},
                )
            )
            assert opened.status_code == 200, person.user_id
            assert next(opened.iter_lines()).startswith("retry:")
