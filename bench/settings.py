"""Settings for `make bench`: the project's own, plus the bare baseline views and task.

Which database, broker vhost and Redis database the processes use comes from the
environment that `python -m bench` gives them (see bench.places.Places), so the dev
stack and the tests are never touched. DEBUG is off, as in production.
"""

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

DEBUG = False
ROOT_URLCONF = "bench.urls"
# An app, so Celery's autodiscovery finds bench.tasks and bench.apps can count SQL.
INSTALLED_APPS = [*INSTALLED_APPS, "bench.apps.BenchConfig"]
