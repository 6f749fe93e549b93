"""The project: settings, URLs, the Celery application and its beat schedule, and the
ASGI/WSGI entry points. It sits above every app and wires them; no app imports it."""

from config.celery import app as celery_app

__all__ = ("celery_app",)
