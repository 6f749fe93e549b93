"""History tests: the archive is a directory of the test's own."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from history.partitions import month_add, month_of


@pytest.fixture
def archive(settings, tmp_path):
    """NOTIFY_ARCHIVE_URL pointed at an empty directory; yields its path."""
    path = tmp_path / "archive"
    settings.NOTIFY_ARCHIVE_URL = str(path)
    settings.NOTIFY_RETENTION_DAYS = 90
    return path


@pytest.fixture
def clock():
    """The 15th of the current month: four months back has ended more than 90 days
    before it, three months back has not, whatever today's date."""
    this_month = month_of(timezone.now())
    return datetime(this_month.year, this_month.month, 15, tzinfo=UTC)


def months_back(now: datetime, n: int):
    return month_add(month_of(now), -n)
