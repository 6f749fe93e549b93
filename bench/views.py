"""Bare baselines: the least a Django + DRF view can do for the same work.

They skip authentication, throttling and validation on purpose; what is left is the
floor the real endpoints are measured against (ratios printed by `make bench`).
"""

from __future__ import annotations

import functools
from typing import Any

from django.db import transaction
from django_redis import get_redis_connection
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notify.models import Category, Notification, Outbox, Producer, Recipient

BENCH_PRODUCER = "bench"
BENCH_CATEGORY = "order.shipped"


def bare_unread_key(user_id: str) -> str:
    """The Redis key the bare unread view reads (set by the bench before its runs)."""
    return f"bench:unread:{user_id}"


@functools.lru_cache(maxsize=64)
def _row_ids(user_id: str) -> tuple[int, int, int, str]:
    """(producer, recipient, category ids, queue), looked up once per process: a bare
    view does not pay for lookups, only for the two inserts."""
    category = Category.objects.get(key=BENCH_CATEGORY)
    return (
        Producer.objects.get(name=BENCH_PRODUCER).pk,
        Recipient.objects.get(user_id=user_id).pk,
        category.pk,
        category.queue,
    )


class BareIntakeView(APIView):
    """POST: a Notification row and its Outbox row in one transaction; nothing else."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    throttle_classes: list[Any] = []

    def post(self, request: Request) -> Response:
        data = request.data
        producer_id, recipient_id, category_id, queue = _row_ids(data["user_id"])
        with transaction.atomic():
            notification = Notification.objects.create(
                producer_id=producer_id,
                event_id=data["event_id"],
                recipient_id=recipient_id,
                category_id=category_id,
                payload=data.get("payload", {}),
                channels=data.get("channels"),
                fingerprint="",
            )
            Outbox.objects.create(notification=notification, queue=queue, producer_id=producer_id)
        return Response({"notification_id": str(notification.pk)}, status=status.HTTP_202_ACCEPTED)


class BareUnreadView(APIView):
    """GET: one Redis GET, returned as the count."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []
    throttle_classes: list[Any] = []

    def get(self, request: Request, user_id: str) -> Response:
        value = get_redis_connection("default").get(bare_unread_key(user_id))
        return Response({"count": int(value or 0)})
