"""The public REST API: one class per operation, thin over services and selectors."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notify.api import serializers as s
from notify.api.auth import ReadAlong
from notify.api.errors import ApiError, error_body, first_validation_error
from notify.api.lookups import (
    category_allowed,
    category_or_422,
    payload_fits,
    recipient_id_or_404,
    recipient_or_404,
    user_id_checked,
)
from notify.api.quota_answers import (
    events_charge_or_503,
    quota_exceeded,
    quota_item_error,
    with_quota_headers,
)
from notify.api.schema import error_responses, linked_from
from notify.feed import feed_entry_document, feed_mark_read
from notify.guard import ChangeAuthor, category_change_refusal
from notify.models import ApiKey, Category, Scope
from notify.selectors import BadCursor, feed_page, recipient_id_cached
from notify.services import (
    Accepted,
    Event,
    IntakeConflict,
    UnknownRecipient,
    category_digests_update,
    notifications_accept,
    recipient_upsert,
)
from notify.unread import unread_count, unread_key


def _event_from(raw: object, api_key: ApiKey) -> Event:
    """A validated event, or an ApiError saying what is wrong with it (400/403/422)."""
    data_in = s.NotificationIn(data=raw)
    if not data_in.is_valid():
        field, message, code = first_validation_error(data_in.errors)
        if code == s.OUT_OF_WINDOW:
            raise ApiError(422, code, message, field=field or None)
        raise ApiError(400, "invalid", message, field=field or None)
    data = data_in.validated_data
    category = category_or_422(data["category"])
    category_allowed(api_key, category)
    payload_fits(category, data["payload"])
    return Event(
        event_id=data["event_id"],
        user_id=data["user_id"],
        category=category,
        payload=data["payload"],
        channels=data.get("channels"),
        ttl_seconds=data.get("ttl_seconds"),
        send_at=data.get("send_at"),
        occurred_at=data.get("occurred_at"),
        subject=data.get("subject", ""),
    )


def _refusal(event: Event, answer: IntakeConflict | UnknownRecipient) -> ApiError:
    if isinstance(answer, UnknownRecipient):
        return ApiError(
            422,
            "unknown_recipient",
            f"No recipient with user_id {event.user_id!r}; register it with "
            "PUT /v1/users/{user_id} first.",
            field="user_id",
        )
    return ApiError(
        409,
        "event_conflict",
        f"event_id {event.event_id!r} was already used with a different body "
        f"(notification {answer.notification.pk}).",
        field="event_id",
    )


class NotificationCreateApi(APIView):
    required_scope = Scope.NOTIFICATIONS_SEND

    @extend_schema(
        operation_id="send_notification",
        request=s.NotificationIn,
        responses={202: s.NotificationAcceptedOut, **error_responses(409, 422)},
        summary="Send an event; returns at once with the notification id.",
    )
    def post(self, request: Request) -> Response:
        event = _event_from(request.data, request.user.api_key)
        # Charged once valid, before it is stored: a replay of an event id counts again.
        charge = events_charge_or_503(producer=request.user.producer, count=1)
        if charge is not None and charge.refused:
            return quota_exceeded(charge)
        answer = notifications_accept(producer=request.user.producer, events=[event])[0]
        if not isinstance(answer, Accepted):
            raise _refusal(event, answer)
        accepted = Response(
            {"notification_id": str(answer.notification_id)}, status=status.HTTP_202_ACCEPTED
        )
        return with_quota_headers(accepted, charge)


class NotificationBatchApi(APIView):
    required_scope = Scope.NOTIFICATIONS_SEND
    body_limit_setting = "NOTIFY_BATCH_MAX_BODY_BYTES"

    @extend_schema(
        operation_id="send_notification_batch",
        request=s.NotificationBatchIn,
        responses={200: s.NotificationBatchOut},
        summary="Send up to NOTIFY_BATCH_MAX_EVENTS events; one answer per event, in order.",
        description=(
            "Each answer carries the status the event would have had alone (202, 400, 403, "
            "409, 422) and its notification id or error. Events are idempotent as single "
            "events are: repeating the batch creates nothing new. Past the producer's quota "
            "in events, the valid events are accepted in order while it lasts and the rest "
            "answer 429 `quota_exceeded` (not stored); the response then carries "
            "Retry-After, and the RateLimit headers whenever a quota applies."
        ),
    )
    def post(self, request: Request) -> Response:
        data_in = s.NotificationBatchIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        answers: list[dict | None] = []
        valid: list[tuple[int, Event]] = []
        for index, raw in enumerate(data_in.validated_data["events"]):
            try:
                valid.append((index, _event_from(raw, request.user.api_key)))
                answers.append(None)
            except ApiError as error:
                answers.append(_item_error(error))
        # The valid events are charged in one take; those past a quota are not stored.
        charge = events_charge_or_503(producer=request.user.producer, count=len(valid))
        if charge is not None:
            for index, _ in valid[charge.granted :]:
                answers[index] = quota_item_error(charge)
            valid = valid[: charge.granted]
        results = notifications_accept(
            producer=request.user.producer, events=[event for _, event in valid]
        )
        for (index, event), answer in zip(valid, results, strict=True):
            if isinstance(answer, Accepted):
                answers[index] = {"status": 202, "notification_id": str(answer.notification_id)}
            else:
                answers[index] = _item_error(_refusal(event, answer))
        return with_quota_headers(Response({"results": answers}), charge)


def _item_error(error: ApiError) -> dict:
    return {
        "status": error.status_code,
        **error_body(error.error_code, str(error.detail), error.field),
    }


class RecipientUpsertApi(APIView):
    required_scope = {"PUT": Scope.RECIPIENTS_WRITE}

    @extend_schema(
        operation_id="upsert_user",
        request=s.RecipientIn,
        responses={200: s.RecipientOut, 201: s.RecipientOut},
        summary="Create or update a recipient's contact data.",
    )
    def put(self, request: Request, user_id: str) -> Response:
        data_in = s.RecipientIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        recipient, created = recipient_upsert(
            user_id=user_id_checked(user_id),
            fields=dict(data_in.validated_data),
            author=ChangeAuthor.of_key(request.user.api_key),
        )
        return Response(
            s.RecipientOut(recipient).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class FeedListApi(APIView):
    required_scope = Scope.USERS_READ
    user_token_allowed = True

    @extend_schema(
        operation_id="list_feed",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        parameters=[
            OpenApiParameter(
                "limit",
                {"type": "integer", "minimum": 1, "maximum": settings.NOTIFY_FEED_MAX_PAGE_SIZE},
                description="Entries per page (default NOTIFY_FEED_PAGE_SIZE).",
            ),
            OpenApiParameter(
                "cursor",
                s.FEED_CURSOR_SCHEMA,
                description="`next_cursor` of the page before; opaque: an unknown one is 400.",
            ),
        ],
        responses={200: s.FeedPageOut},
        summary="The feed, latest event first.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        limit = _feed_limit(request.query_params.get("limit"))
        try:
            page = feed_page(
                recipient=recipient, cursor=request.query_params.get("cursor"), limit=limit
            )
        except BadCursor:
            raise ApiError(400, "invalid_cursor", "Unknown cursor.", field="cursor") from None
        results = [feed_entry_document(entry) for entry in page.entries]
        # The person's language and zone: the inbox shows itself in them (docs/inbox.md).
        person = {"locale": recipient.locale, "timezone": recipient.timezone or "UTC"}
        page_out = {"results": results, "next_cursor": page.next_cursor, **person}
        return Response(s.FeedPageOut(page_out).data)


def _feed_limit(raw: str | None) -> int:
    """The page size asked for, or a 400 unless it is 1 to NOTIFY_FEED_MAX_PAGE_SIZE."""
    if raw is None:
        return settings.NOTIFY_FEED_PAGE_SIZE
    top = settings.NOTIFY_FEED_MAX_PAGE_SIZE
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= top:
        raise ApiError(400, "invalid", f"limit must be a number from 1 to {top}.", field="limit")
    return int(raw)


class FeedReadApi(APIView):
    required_scope = Scope.USERS_READ
    user_token_allowed = True

    @extend_schema(
        operation_id="mark_feed_read",
        request=s.FeedReadIn,
        responses={200: s.FeedReadOut},
        summary="Mark read.",
    )
    def post(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        data_in = s.FeedReadIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        marked = feed_mark_read(
            recipient=recipient,
            entry_ids=data_in.validated_data.get("ids"),
            everything=data_in.validated_data["all"],
        )
        return Response({"marked": marked})


class UnreadCountApi(APIView):
    required_scope = Scope.USERS_READ
    user_token_allowed = True
    # Polled by every open page, and needing no session, cookie or CSRF check: served
    # through the short middleware stack (config/handlers.py).
    lean_stack = True
    # Set by read_along_key when this process knows the path's user id, and by
    # ApiRateThrottle with the counter it read in the rate limit's round trip.
    known_recipient_id: int | None = None
    read_along: ReadAlong | None = None

    def read_along_key(self, request: Request) -> str | None:
        """The counter's key, for the rate limit to read in its round trip, when this
        process knows the path's user id; else None (the view looks it up, as before)."""
        self.known_recipient_id = recipient_id_cached(user_id=self.kwargs.get("user_id", ""))
        return None if self.known_recipient_id is None else unread_key(self.known_recipient_id)

    @extend_schema(
        operation_id="get_unread_count",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        responses={200: s.UnreadCountOut},
        summary="Unread count, from Redis.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        # Warm, polling the badge costs one Redis round trip (the rate limit's, which read
        # the counter too) and no query; cold, the id is looked up (then cached) first.
        if self.read_along is not None and self.known_recipient_id is not None:
            count = unread_count(recipient_id=self.known_recipient_id, read=self.read_along.value)
        else:
            count = unread_count(recipient_id=recipient_id_or_404(user_id))
        if count is None:
            return Response({"count": None, "available": False})
        return Response({"count": count})


def _category_or_404(key: str) -> Category:
    category = Category.objects.filter(key=key).first()
    if category is None:
        raise ApiError(404, "not_found", f"No category {key!r}.")
    return category


class CategoryListApi(APIView):
    required_scope = Scope.CATEGORIES_READ

    @extend_schema(
        operation_id="list_categories",
        responses={200: s.CategoryListOut},
        summary="Every category: its queue class, flags, channels, TTL and digest settings.",
    )
    def get(self, request: Request) -> Response:
        categories = Category.objects.order_by("key")
        return Response(s.CategoryListOut({"results": categories}).data)


class CategoryApi(APIView):
    required_scope = {"GET": Scope.CATEGORIES_READ, "PATCH": Scope.CATEGORIES_WRITE}

    @extend_schema(
        operation_id="get_category",
        responses={200: s.CategoryOut},
        summary="One category, by key.",
    )
    def get(self, request: Request, key: str) -> Response:
        return Response(s.CategoryOut(_category_or_404(key)).data)

    @extend_schema(
        operation_id="update_category_digests",
        request=s.CategoryDigestsIn,
        responses={200: s.CategoryOut, **error_responses(422)},
        summary="Change a category's digest and delay settings (only those).",
        description=(
            "Only the keys of the producer that owns the category (set in admin) may: "
            "any other key is a 403 `category_not_owned`. Each change is kept in the "
            "category's admin history with the key that made it. "
            "Fields left out stay as they are. Validated as an admin save is, and a "
            "refusal names the field and changes nothing: a value outside this schema (a "
            "window or delay of 0 or less, an unknown channel) is a 400 `invalid`; a "
            "well-formed one that this category refuses (a digest or delay on a mandatory "
            "category, a channel both digested and delayed, a digest key that is not a "
            "payload field, a change that would break a published template) is a 422 "
            "`invalid_settings`. The next notification routed uses the new settings."
        ),
    )
    def patch(self, request: Request, key: str) -> Response:
        data_in = s.CategoryDigestsIn(data=request.data)
        data_in.is_valid(raise_exception=True)
        api_key = request.user.api_key
        category = _category_or_404(key)
        refusal = category_change_refusal(api_key=api_key, category=category)
        if refusal is not None:
            raise ApiError(403, "category_not_owned", refusal)
        category_allowed(api_key, category)
        fields = dict(data_in.validated_data)
        try:
            category = category_digests_update(
                key=key, fields=fields, author=ChangeAuthor.of_key(api_key)
            )
        except ValidationError as refused:
            raise _category_refusal(refused, fields) from None
        if category is None:
            raise ApiError(404, "not_found", f"No category {key!r}.")
        return Response(s.CategoryOut(category).data)


def _category_refusal(refused: ValidationError, sent: dict) -> ApiError:
    """The category's own validation error, naming its first field: a 400 `invalid` when
    the value sent for that field breaks its published schema (a window of 0, an unknown
    channel), else a 422 `invalid_settings` (well-formed, but this category refuses it:
    it is mandatory, a channel would be both digested and delayed, the digest key is not
    one of its payload fields, or a published template would break)."""
    problems = refused.message_dict
    field = next(iter(problems))
    message = " ".join(problems[field])
    named = None if field == NON_FIELD_ERRORS else field
    if field in sent and not s.category_setting_fits_schema(field, sent[field]):
        return ApiError(400, "invalid", message, field=named)
    return ApiError(422, "invalid_settings", message, field=named)
