"""Health and beat liveness read /metrics as the operations tests do."""

from tests.deliveries.ops.conftest import scrape  # noqa: F401 - a fixture for this folder
