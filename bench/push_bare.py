"""S10's baselines: bare concurrent push clients, run as a process of their own.

`python -m bench.push_bare webpush JOBS.json` posts every job of the file to its push
endpoint with pywebpush's WebPusher (the same RFC 8291 aes128gcm encryption and
requests stack the Web Push channel uses), CONCURRENCY at once over one requests session
keeping as many connections, one VAPID JWT signed first and reused (as the channel
reuses one per push service). `python -m bench.push_bare fcm JOBS.json` fetches one
OAuth token with google-auth from the service account's token endpoint, then posts each
job's FCM v1 message, CONCURRENCY at once. Neither touches Django, the database or the
broker: this is what sending the same payloads costs with nothing around it.

It prints one JSON line: the wall-clock time of the first post's start and of the last
answer, and the answers by status. Start-up (imports, the token, the JWT) is before the
first post, so never inside the figure.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

# What one bare request may take at most, as the channels' per-read timeouts.
TIMEOUT = (3.0, 5.0)


def _session(connections: int) -> requests.Session:
    session = requests.Session()
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=connections, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def webpush_drain(spec: dict[str, Any]) -> dict[str, Any]:
    """Encrypt and post every job of `spec` (see the module docstring)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key
    from py_vapid import Vapid
    from pywebpush import WebPusher

    pem = Path(spec["vapid_key"]).read_bytes()
    vapid = Vapid(private_key=load_pem_private_key(pem, password=None))
    authorization = vapid.sign(
        {"aud": spec["origin"], "exp": int(time.time()) + 12 * 3600, "sub": spec["subject"]}
    )
    session = _session(spec["concurrency"])

    def post(job: dict[str, Any]) -> int:
        headers = {**authorization, "Urgency": "normal"}
        subscription = {"endpoint": job["endpoint"], "keys": job["keys"]}
        answer = WebPusher(subscription, requests_session=session).send(
            job["payload"].encode(), headers, ttl=spec["ttl"], timeout=TIMEOUT
        )
        return answer.status_code

    return _run(post, spec["jobs"], spec["concurrency"])


def fcm_drain(spec: dict[str, Any]) -> dict[str, Any]:
    """Fetch one access token, then post every job's FCM v1 message."""
    import google.auth.transport.requests
    from google.oauth2 import service_account

    credentials = service_account.Credentials.from_service_account_file(
        spec["credentials"], scopes=["https://www.googleapis.com/auth/firebase.messaging"]
    )
    credentials.refresh(google.auth.transport.requests.Request())
    session = _session(spec["concurrency"])
    headers = {"Authorization": f"Bearer {credentials.token}"}

    def post(job: dict[str, Any]) -> int:
        answer = session.post(spec["url"], json=job, headers=headers, timeout=TIMEOUT)
        return answer.status_code

    return _run(post, spec["jobs"], spec["concurrency"])


def _run(post: Any, jobs: list[dict[str, Any]], concurrency: int) -> dict[str, Any]:
    def safe(job: dict[str, Any]) -> str:
        try:
            return str(post(job))
        except requests.RequestException as error:
            return type(error).__name__

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        first = time.time()
        statuses = Counter(pool.map(safe, jobs))
        last = time.time()
    return {"first": first, "last": last, "statuses": dict(statuses)}


def main() -> int:
    kind, path = sys.argv[1], sys.argv[2]
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    drain = {"webpush": webpush_drain, "fcm": fcm_drain}[kind]
    print(json.dumps(drain(spec)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
