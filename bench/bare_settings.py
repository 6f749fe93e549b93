"""Settings of the bare baselines' server: the bench's, with only the bare views routed."""

from bench.settings import *  # noqa: F403

ROOT_URLCONF = "bench.urls"
