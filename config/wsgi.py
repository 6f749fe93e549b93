"""WSGI entry point, for servers that do not speak ASGI (no live stream there)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

# Django's handler, with a short middleware stack for the views that need no more
# (config/handlers.py).
from config.handlers import NotifyWSGIHandler  # noqa: E402 - needs the apps loaded

application = NotifyWSGIHandler()

from notify.checks import secret_key_refuse_weak  # noqa: E402 - needs the settings loaded

secret_key_refuse_weak()

from notify.ops.heap import startup_heap_freeze  # noqa: E402 - after the app is loaded

startup_heap_freeze()
