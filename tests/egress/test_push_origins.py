"""Web Push endpoints are hostile input: allowed origins only, no redirects, bounded answers.

No test here sends traffic anywhere but to 127.0.0.1 peers: refused endpoints are
asserted refused, never tried.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import ImproperlyConfigured

from deliveries.channels import webpush
from deliveries.channels.base import parse_retry_after
from deliveries.models import Device
from egress.origins import EndpointRefused, endpoint_check
from tests.deliveries.push.test_devices_api import webpush_body
from tests.deliveries.push.test_webpush import register_device, register_user, send_order, settled

DEFAULTS = [
    "https://fcm.googleapis.com",
    "https://updates.push.services.mozilla.com",
    "https://*.notify.windows.com",
    "https://web.push.apple.com",
    "https://*.push.apple.com",
]


def resolver(*addresses: str):
    def resolve(host: str, port: int) -> list[str]:
        return list(addresses)

    return resolve


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"{host} should not have been resolved")


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:15672/api/overview",
        "http://169.254.169.254/latest/meta-data",
        "http://fcm.googleapis.com/fcm/send/x",  # https only
        "https://fcm.googleapis.com:8443/fcm/send/x",  # another port
        "https://evilfcm.googleapis.com/x",
        "https://wns.notify.windows.com.attacker.test/x",
        "https://user:pw@fcm.googleapis.com/fcm/send/x",
        "ftp://fcm.googleapis.com/x",
        "https://[::1]/x",
    ],
)
def test_endpoints_outside_the_allowed_origins_are_refused(endpoint):
    with pytest.raises(EndpointRefused):
        endpoint_check(endpoint, origins=DEFAULTS, resolve=no_dns)


def test_the_major_browsers_push_services_are_allowed_by_default():
    public = resolver("17.253.1.1")
    for endpoint in [
        "https://fcm.googleapis.com/fcm/send/abc",
        "https://updates.push.services.mozilla.com/wpush/v2/abc",
        "https://db5p.notify.windows.com/w/?token=abc",
        "https://web.push.apple.com/QGx",
        "https://api.push.apple.com/3/device/abc",
    ]:
        endpoint_check(endpoint, origins=DEFAULTS, resolve=public)


def test_a_wildcard_host_that_resolves_to_internal_space_is_refused():
    for internal in ["127.0.0.1", "10.1.2.3", "192.168.0.9", "169.254.169.254", "::1", "fd00::1"]:
        with pytest.raises(EndpointRefused, match="non-public"):
            endpoint_check(
                "https://rebind.notify.windows.com/x", origins=DEFAULTS, resolve=resolver(internal)
            )
    with pytest.raises(EndpointRefused):  # one internal address among public ones is enough
        endpoint_check(
            "https://x.push.apple.com/x", origins=DEFAULTS, resolve=resolver("17.1.1.1", "10.0.0.1")
        )


def test_a_loopback_origin_listed_exactly_is_allowed():
    endpoint_check(
        "http://127.0.0.1:8765/push/a", origins=["http://127.0.0.1:8765"], resolve=no_dns
    )


def test_a_malformed_allowed_origin_stops_the_process():
    with pytest.raises(ImproperlyConfigured):
        endpoint_check("https://a.example/x", origins=["fcm.googleapis.com"])


@pytest.mark.parametrize(
    "endpoint", ["http://127.0.0.1:15672/api/overview", "http://169.254.169.254/latest/meta-data"]
)
def test_registering_an_internal_endpoint_is_refused(api, endpoint):
    api.put("/v1/users/ssrf-1", {}, format="json")
    response = api.post("/v1/users/ssrf-1/devices", webpush_body(endpoint), format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("endpoint_not_allowed", "endpoint")
    assert not Device.objects.filter(recipient__user_id="ssrf-1").exists()


@pytest.mark.parametrize(
    "value",
    ["999999999999", "9" * 400, "Fri, 31 Dec 9999 23:59:59 GMT", "Fri, 31 Dec 9999 23:59:59 -0000"],
)
def test_a_huge_retry_after_is_bounded(value, settings):
    settings.NOTIFY_PUSH_RETRY_AFTER_MAX = 3600.0
    assert parse_retry_after(value) == 3600.0


@pytest.mark.parametrize("value", ["²", "-5", "soon", "1.5e3", ""])
def test_a_garbled_retry_after_is_ignored(value):
    assert parse_retry_after(value) is None


class _BigAnswer(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.send_response(500)
        self.send_header("Content-Length", str(10 * 1024 * 1024))
        self.end_headers()
        try:
            for _ in range(10 * 1024):
                self.wfile.write(b"x" * 1024)
        except OSError:
            pass  # the client stopped reading, as it should


def test_only_the_first_kib_of_a_push_services_answer_is_read(settings):
    settings.WEBPUSH_MAX_RESPONSE_BYTES = 4096
    server = ThreadingHTTPServer(("127.0.0.1", 0), _BigAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/push/big"
        response = webpush.push_session().post(url, data=b"x", timeout=5)
        assert response.status_code == 500
        assert len(response.content) == 4096
        assert len(response.text) == 4096
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.e2e
def test_a_redirecting_push_endpoint_is_not_followed(api, pipeline, push_service):
    register_user(api, "wp-redirect")
    _, body = push_service.subscribe("redirector")
    push_service.subscribe("redirect-target")
    register_device(api, "wp-redirect", body)
    target = f"{push_service.origin}/push/redirect-target"
    push_service.answer("redirector", (307, {"Location": target}))

    status = settled(api, send_order(api, "wp-redirect"))

    assert (status["status"], status["attempts"]) == ("failed", 1)
    assert [r.status for r in push_service.deliveries_to("redirector")] == [307]
    assert push_service.deliveries_to("redirect-target") == []


@pytest.mark.e2e
def test_a_huge_retry_after_does_not_leave_the_push_stuck_in_sending(api, pipeline, push_service):
    register_user(api, "wp-huge-wait")
    _, body = push_service.subscribe("sleepy")
    register_device(api, "wp-huge-wait", body)
    push_service.answer("sleepy", (429, {"Retry-After": "999999999999"}))

    status = settled(api, send_order(api, "wp-huge-wait"))

    # Asked to wait far past its deadline (the TTL), the push expires instead.
    assert (status["status"], status["reason"], status["attempts"]) == (
        "expired",
        "deadline_passed",
        1,
    )


class _Trap(BaseHTTPRequestHandler):
    hits: list[str] = []

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        _Trap.hits.append(self.path)
        self.send_response(201)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.mark.e2e
def test_a_stored_endpoint_no_longer_allowed_is_not_posted_to_at_send_time(
    api, pipeline, push_service
):
    # A device saved before the origin was taken off the list (or written around the API):
    # the sender checks again and never posts.
    trap = ThreadingHTTPServer(("127.0.0.1", 0), _Trap)
    threading.Thread(target=trap.serve_forever, daemon=True).start()
    try:
        register_user(api, "wp-stale")
        _, body = push_service.subscribe("stale")
        device_id = register_device(api, "wp-stale", body)
        trap_endpoint = f"http://127.0.0.1:{trap.server_address[1]}/push/stale"
        Device.objects.filter(pk=device_id).update(endpoint=trap_endpoint)

        status = settled(api, send_order(api, "wp-stale"))

        assert (status["status"], status["attempts"]) == ("failed", 1)
        assert "endpoint" in status["last_error"]
        assert _Trap.hits == []
    finally:
        trap.shutdown()
        trap.server_close()
