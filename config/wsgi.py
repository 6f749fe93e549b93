"""WSGI entry point, for servers that do not speak ASGI (no live stream there)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

from notify.checks import secret_key_refuse_weak  # noqa: E402 - needs the settings loaded

secret_key_refuse_weak()
