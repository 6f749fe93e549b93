"""Settings for `make bench`: the project's own, plus the bench's app (its task and its
SQL counting).

Which database, broker vhost and Redis database the processes use comes from the
environment that `python -m bench` gives them (see bench.places.Places), so the dev
stack and the tests are never touched. DEBUG is off, as in production. The project's
URLs are served as shipped; the bare baselines have a server of their own
(bench.bare_settings, bench.bare_server).
"""

from config.settings import *  # noqa: F403
from config.settings import INSTALLED_APPS

DEBUG = False
# An app, so Celery's autodiscovery finds bench.tasks and bench.apps can count SQL.
INSTALLED_APPS = [*INSTALLED_APPS, "bench.apps.BenchConfig"]
