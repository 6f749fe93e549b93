"""The web tier's two process types: web (gunicorn, WSGI) for everything but the live
stream, stream (uvicorn, ASGI) for the stream alone, behind one path-routing rule."""

from __future__ import annotations

import re

import pytest
import yaml
from django.test import Client
from django.urls import Resolver404, resolve

from notify.models import Recipient
from notify.tokens import user_token_issue
from tests.conftest import ROOT

PROXY_CONF = ROOT / "compose" / "proxy.conf"
# Every kind of path the project serves, and the stream's own with odd user ids.
NOT_STREAM = [
    "/v1/notifications",
    "/v1/users/u1/feed",
    "/v1/users/u1/unread-count",
    "/v1/users/u1/preferences",
    "/v1/users/u1/devices",
    "/v1/users/stream/feed",
    "/v1/users/u1/stream/extra",
    "/v1/schema",
    "/admin/",
    "/static/admin/css/base.css",
    "/healthz",
]
STREAM = ["/v1/users/u1/stream", "/v1/users/a.b-c_d%40e/stream", "/v1/users/stream/stream"]


def _stream_rule() -> re.Pattern[str]:
    """The regular expression of the proxy's one `location ~ …` block."""
    found = re.findall(r"location ~ (\S+) \{", PROXY_CONF.read_text())
    assert len(found) == 1, "the proxy has one path-routing rule"
    return re.compile(found[0])


def _is_stream_view(path: str) -> bool:
    try:
        return resolve(path.split("?")[0]).url_name == "stream"
    except Resolver404:
        return False


@pytest.mark.parametrize("path", STREAM + NOT_STREAM)
def test_the_proxy_sends_exactly_the_stream_to_the_stream_process(path):
    assert bool(_stream_rule().search(path)) is _is_stream_view(path)


def test_the_procfile_and_both_compose_files_run_the_two_web_processes():
    procfile = dict(
        line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    assert procfile["web"] == "bash scripts/web.sh"
    assert procfile["stream"] == "bash scripts/stream.sh"
    for name in ("docker-compose.yml", "docker-compose.cluster.yml"):
        services = yaml.safe_load((ROOT / name).read_text())["services"]
        assert "exec bash scripts/web.sh" in services["web"]["command"], name
        assert services["stream"]["command"] == "bash scripts/stream.sh", name
        proxy = services["proxy"]
        assert "./compose/proxy.conf:/etc/nginx/conf.d/default.conf:ro" in proxy["volumes"]
        assert proxy["ports"] == ["127.0.0.1:8000:8000"], name
        assert "ports" not in services["web"], f"{name}: only the proxy is published"


@pytest.mark.django_db
def test_a_stream_misrouted_to_the_wsgi_server_is_refused_at_once_instead_of_held():
    person = Recipient.objects.create(user_id="wsgi-stream")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(recipient_id=person.pk)}")
    response = client.get("/v1/users/wsgi-stream/stream")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "stream_elsewhere"
