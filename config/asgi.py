"""ASGI entry point: `uvicorn config.asgi:application`."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_asgi_application()

from notify.checks import secret_key_refuse_weak  # noqa: E402 - needs the settings loaded

secret_key_refuse_weak()

from notify.ops.heap import startup_heap_freeze  # noqa: E402 - after the app is loaded

startup_heap_freeze()
