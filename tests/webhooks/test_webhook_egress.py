"""Status webhook egress: a post connects only to the addresses its check judged, so a DNS
answer that changes after the check (rebinding) reaches nothing; IPv6 forms that carry a
loopback, private or metadata IPv4 address are refused like the address itself.

No traffic leaves loopback: every test runs under `network_guard`, which lets a connect
to a loopback address through and stops any other before a packet is sent (recording
it), and a name is made to resolve by patching `socket.getaddrinfo`, the outermost edge.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from django.utils import timezone

from egress.guard import EgressTarget, connections_pinned, egress_session
from egress.origins import EndpointRefused, address_is_public, endpoint_check
from notify.models import Producer
from tests.peers.webhooks import WebhookReceiver
from webhooks.models import WebhookEndpoint, WebhookEvent
from webhooks.posting import event_post

# A name only these tests resolve (through the patched resolver).
REBINDING_NAME = "rebind.hooks.test"
# A public address the check accepts; `network_guard` stops any connect to it.
PUBLIC = "93.184.216.34"


@pytest.fixture
def network_guard(monkeypatch):
    """Connects to a non-loopback address fail at once, unsent; returns those tried."""
    stopped: list[tuple[str, int]] = []
    connect, connect_ex = socket.socket.connect, socket.socket.connect_ex

    def loopback_only(real):
        def guarded(sock, address):
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                host = address[0].split("%", 1)[0]
                if not ipaddress.ip_address(host).is_loopback:
                    stopped.append((host, address[1]))
                    raise ConnectionRefusedError(f"test network guard: {host} is not loopback")
            return real(sock, address)

        return guarded

    monkeypatch.setattr(socket.socket, "connect", loopback_only(connect))
    monkeypatch.setattr(socket.socket, "connect_ex", loopback_only(connect_ex))
    return stopped


def rebinding_dns(monkeypatch, *, first: list[str], then: str) -> list[str]:
    """REBINDING_NAME resolves to `first` on its first lookup and to `then` on any later
    one; other names resolve as usual. Returns the lookups of the name made."""
    lookups: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host != REBINDING_NAME:
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        answers = first if len(lookups) == 1 else [then]
        return [info for a in answers for info in real(a, port, *args, **kwargs)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return lookups


def listener() -> tuple[socket.socket, threading.Event]:
    """A loopback socket that notes whether anything connected to it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    sock.settimeout(0.5)
    connected = threading.Event()

    def accept() -> None:
        try:
            sock.accept()[0].close()
            connected.set()
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    return sock, connected


def post_to(url: str):
    """Post one event to an endpoint at `url` (written past the API, as if its DNS
    changed since registration) and return the result."""
    endpoint = WebhookEndpoint.objects.create(
        producer=Producer.objects.get_or_create(name="egress")[0],
        url=url,
        secret="whsec_" + "A" * 32,
    )
    event = WebhookEvent(
        endpoint=endpoint,
        msg_id="msg_egress",
        event_type="delivery.delivered",
        payload={},
        next_attempt_at=timezone.now(),
        created_at=timezone.now(),
    )
    return event_post(event, now=timezone.now())


EMBEDDED = [
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::7f00:1",  # local-use NAT64
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "::127.0.0.1",  # IPv4-compatible
    "::ffff:169.254.169.254",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "::ffff:0:7f00:1",  # IPv4-translated
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
]


@pytest.mark.parametrize("address", EMBEDDED)
def test_an_ipv6_form_carrying_a_loopback_or_metadata_address_is_never_posted_to(
    db, network_guard, address
):
    result = post_to(f"https://[{address}]:8443/hook")
    assert not result.ok and result.status_code == "egress_refused"
    assert "private, loopback or metadata" in result.response
    assert network_guard == []  # nothing tried, loopback or not


@pytest.fixture
def webhooks_api(db):
    """An API client whose key may register webhooks."""
    from rest_framework.test import APIClient

    from notify.api_keys import api_key_issue

    client = APIClient()
    issued = api_key_issue(producer_name="egress", scopes=["webhooks:write"])
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.key}")
    return client


@pytest.mark.parametrize("address", EMBEDDED)
def test_an_ipv6_form_carrying_a_loopback_or_metadata_address_is_refused_at_registration(
    webhooks_api, address
):
    response = webhooks_api.post(
        "/v1/webhooks",
        {"url": f"https://[{address}]/hook", "event_types": ["delivery.delivered"]},
        format="json",
    )
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "endpoint_not_allowed"
    assert not WebhookEndpoint.objects.exists()


def test_a_wildcard_push_host_resolving_to_an_embedded_loopback_address_is_refused():
    with pytest.raises(EndpointRefused, match="non-public"):
        endpoint_check(
            "https://x.push.apple.com/x",
            origins=["https://*.push.apple.com"],
            resolve=lambda host, port: ["2002:7f00:1::"],
        )


def test_public_addresses_stay_public_in_their_ipv6_forms():
    for address in [
        "8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::",
        "::ffff:8.8.8.8",
        "2606:4700:4700::1111",
    ]:
        assert address_is_public(address), address
    for address in ["127.0.0.1", "169.254.169.254", "10.1.2.3", "::1", "fd00::1", *EMBEDDED]:
        assert not address_is_public(address), address


def test_a_host_that_rebinds_to_loopback_after_the_check_is_never_connected_to_there(
    db, monkeypatch, network_guard
):
    """The check sees a public address; any later lookup would say 127.0.0.1, where a
    listener waits. The post goes to the checked address only (stopped by the guard)."""
    sock, connected = listener()
    port = sock.getsockname()[1]
    lookups = rebinding_dns(monkeypatch, first=[PUBLIC], then="127.0.0.1")
    try:
        result = post_to(f"https://{REBINDING_NAME}:{port}/hook")
    finally:
        sock.close()
    assert not connected.is_set()  # nothing reached loopback
    assert lookups == [REBINDING_NAME]  # looked up once, by the check
    assert network_guard == [(PUBLIC, port)]  # it went for the checked address only
    assert not result.ok and result.status_code == "ConnectionError"
    assert PUBLIC in result.response


def test_a_host_with_a_loopback_address_among_public_ones_is_refused(
    db, monkeypatch, network_guard
):
    sock, connected = listener()
    port = sock.getsockname()[1]
    rebinding_dns(monkeypatch, first=[PUBLIC, "127.0.0.1"], then="127.0.0.1")
    try:
        result = post_to(f"https://{REBINDING_NAME}:{port}/hook")
    finally:
        sock.close()
    assert not result.ok and result.status_code == "egress_refused"
    assert "private, loopback or metadata" in result.response
    assert not connected.is_set() and network_guard == []


@pytest.fixture
def receivers():
    """Two loopback receivers on one port: 127.0.0.1 (where a rebinding answer points)
    and 127.0.0.2 (the address the check is given)."""
    rebound = WebhookReceiver(0)
    port = rebound.server.server_address[1]
    rebound.port = port
    checked = WebhookReceiver(port, host="127.0.0.2")
    for peer in (rebound, checked):
        peer.start()
    yield checked, rebound
    for peer in (rebound, checked):
        peer.stop()


def test_a_receiver_listed_by_name_gets_posts_addressed_to_its_name(
    db, monkeypatch, network_guard, settings, receivers
):
    """A listed origin named by host: the name is resolved once, the post goes to that
    address with the name in its Host header, and a later answer changes nothing."""
    checked, rebound = receivers
    origin = f"http://{REBINDING_NAME}:{checked.port}"
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS = [origin]
    lookups = rebinding_dns(monkeypatch, first=["127.0.0.2"], then="127.0.0.1")
    result = post_to(f"{origin}/hook")
    assert result.ok, result
    assert len(checked.accepted()) == 1 and rebound.received == []
    headers = checked.accepted()[0][0]
    assert headers["Host"] == f"{REBINDING_NAME}:{checked.port}"
    assert lookups == [REBINDING_NAME] and network_guard == []


def test_a_listed_loopback_receiver_still_gets_posts(db, settings, receivers):
    _, receiver = receivers
    settings.NOTIFY_WEBHOOK_ALLOWED_PRIVATE_ORIGINS = [f"http://127.0.0.1:{receiver.port}"]
    result = post_to(receiver.url)
    assert result.ok and len(receiver.accepted()) == 1


def test_the_egress_session_connects_nowhere_without_a_checked_address(receivers):
    _, receiver = receivers
    session = egress_session(5.0, 4096)
    with pytest.raises(requests.ConnectionError, match="no checked address"):
        session.post(receiver.url, data=b"{}")
    assert receiver.received == []


def self_signed(name: str, directory) -> tuple[str, str]:
    """A certificate for `name` (its own CA) and its key, as PEM files in `directory`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_file), str(key_file)


@pytest.fixture
def tls_receiver(tmp_path):
    """An HTTPS receiver on 127.0.0.2 with a certificate for REBINDING_NAME; notes the
    SNI names and Host headers it was sent."""
    cert, key = self_signed(REBINDING_NAME, tmp_path)
    seen: dict[str, list[str]] = {"sni": [], "host": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            seen["host"].append(self.headers["Host"])
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    def note_sni(_sock, name, _context) -> None:
        seen["sni"].append(name)

    context.sni_callback = note_sni
    server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], cert, seen
    server.shutdown()
    server.server_close()


def test_a_pinned_https_post_checks_the_certificate_of_the_name_not_the_address(
    tls_receiver, network_guard
):
    port, cert, seen = tls_receiver
    target = EgressTarget(host=REBINDING_NAME, port=port, addresses=("127.0.0.2",))
    session = egress_session(5.0, 4096)
    with connections_pinned(target):
        answer = session.post(f"https://{REBINDING_NAME}:{port}/hook", data=b"{}", verify=cert)
    assert answer.status_code == 204
    assert seen["sni"] == [REBINDING_NAME]
    assert seen["host"] == [f"{REBINDING_NAME}:{port}"]
    # Another name pinned to the same address: its certificate does not match that name.
    wrong = EgressTarget(host="wrong.hooks.test", port=port, addresses=("127.0.0.2",))
    with connections_pinned(wrong), pytest.raises(requests.exceptions.SSLError, match="mismatch"):
        session.post(f"https://wrong.hooks.test:{port}/hook", data=b"{}", verify=cert)
    assert seen["host"] == [f"{REBINDING_NAME}:{port}"]  # nothing sent over it
    assert network_guard == []
