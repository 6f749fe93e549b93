"""Notify: the Django project package and the core domain (intake, recipients, feed)."""

from notify.celery import app as celery_app

__all__ = ("celery_app",)
