"""Preferences API, end-user tokens and the one-click unsubscribe endpoint."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from notify.api.auth import UserPrincipal
from notify.api.errors import ApiError
from notify.api.lookups import recipient_or_404
from notify.api.schema import error_responses, linked_from
from notify.api.serializers import LanguageTagField, TimeZoneField
from notify.api.strict import StrictSerializer
from notify.category_labels import category_text
from notify.models import Channel, Recipient, Scope
from notify.tokens import user_token_issue
from preferences.center import preference_center_links_revoke
from preferences.languages import person_translation
from preferences.models import ConsentSource
from preferences.selectors import preferences_document
from preferences.services import (
    MandatoryCategory,
    RequestOrigin,
    UnknownCell,
    Unsubscribed,
    preferences_update,
    recipient_settings_change,
    unsubscribe,
)
from preferences.tokens import preference_center_url, unsubscribe_token_read

# A producer may say where a change came from; an end user's token is always the
# preference center, `email_link` belongs to the unsubscribe endpoint alone, and
# `support` to the admin (a staff member's act, which no API key may claim).
PRODUCER_SOURCES = [
    ConsentSource.SIGNUP,
    ConsentSource.API,
    ConsentSource.PREFERENCE_CENTER,
]


@extend_schema_field(
    # What strptime's %H:%M takes (one or two digits each), stated for the OpenAPI schema.
    {"type": "string", "pattern": r"^([01]?[0-9]|2[0-3]):[0-5]?[0-9]$", "example": "21:00"}
)
class HourMinuteField(serializers.TimeField):
    """A local wall-clock time as `HH:MM`."""

    def __init__(self, **kwargs) -> None:
        super().__init__(format="%H:%M", input_formats=["%H:%M"], **kwargs)


class QuietHoursField(StrictSerializer):
    """The recipient's quiet window in local wall-clock time; start == end: none."""

    start = HourMinuteField()
    end = HourMinuteField()


class PreferencesIn(StrictSerializer):
    categories = serializers.DictField(
        child=serializers.DictField(child=serializers.BooleanField()),
        allow_empty=True,
        required=False,
        default=dict,
    )
    quiet_hours = QuietHoursField(required=False)
    timezone = TimeZoneField(required=False, help_text="The time quiet hours are kept in.")
    locale = LanguageTagField(
        required=False, allow_blank=True, help_text="The person's language; blank: none set."
    )
    source = serializers.ChoiceField(choices=PRODUCER_SOURCES, required=False)
    consent_text_version = serializers.CharField(max_length=50, required=False, allow_blank=True)

    # A cell is a category and a channel: the channels are known to the schema (another is
    # a 422 `unknown_preference`, as is a category that does not exist).
    openapi_extra = {
        "properties": {
            "categories": {
                "description": "Cells to change: category key → channel → on (true) or off.",
                "additionalProperties": {
                    "type": "object",
                    "properties": {channel: {"type": "boolean"} for channel in Channel.values},
                    "additionalProperties": False,
                },
            }
        }
    }


class CategoryTextOut(serializers.Serializer):
    label = serializers.CharField()
    description = serializers.CharField(allow_blank=True)


class PreferencesOut(serializers.Serializer):
    categories = serializers.DictField(
        child=serializers.DictField(child=serializers.BooleanField())
    )
    mandatory = serializers.ListField(child=serializers.CharField())
    labels = serializers.DictField(
        child=CategoryTextOut(),
        help_text="Category key → its label and description in the person's language "
        "(their `locale`, else the default language); description may be empty.",
    )
    quiet_hours = QuietHoursField()
    timezone = TimeZoneField()
    locale = serializers.CharField(help_text="A language tag; empty when none is set.")
    languages = serializers.ListField(
        child=serializers.CharField(),
        help_text="The language tags a person is offered (the preference center's and the "
        "inbox's choices): the configured ones, plus the person's own.",
    )


class UserTokenOut(serializers.Serializer):
    token = serializers.CharField()
    expires_in = serializers.IntegerField()


def _client_ip(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR") or None


class PreferencesApi(APIView):
    required_scope = {"GET": Scope.USERS_READ, "PUT": Scope.PREFERENCES_WRITE}
    user_token_allowed = True

    @extend_schema(
        operation_id="get_preferences",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        responses={200: PreferencesOut},
        summary="Effective preferences per cell.",
    )
    def get(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        return Response(preferences_document(recipient=recipient))

    @extend_schema(
        operation_id="update_preferences",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        request=PreferencesIn,
        responses={200: PreferencesOut, **error_responses(409, 422)},
        summary="Change cells, quiet hours, time zone, language (each optional); a "
        "mandatory category's cell → 409.",
    )
    def put(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        body = request.data
        if isinstance(request.user, UserPrincipal) and isinstance(body, dict):
            body = {key: value for key, value in body.items() if key != "source"}  # ignored
        data_in = PreferencesIn(data=body)
        data_in.is_valid(raise_exception=True)
        data = data_in.validated_data
        if isinstance(request.user, UserPrincipal):
            source = ConsentSource.PREFERENCE_CENTER
        else:
            source = data.get("source", ConsentSource.API)
        origin = RequestOrigin(
            source=source,
            text_version=data.get("consent_text_version", ""),
            ip_address=_client_ip(request),
            user_agent=request.META.get("HTTP_USER_AGENT", ""),
        )
        quiet = data.get("quiet_hours")
        try:
            with transaction.atomic():
                preferences_update(recipient=recipient, cells=data["categories"], origin=origin)
                recipient_settings_change(
                    recipient=recipient,
                    source=source,
                    quiet_hours=(quiet["start"], quiet["end"]) if quiet else None,
                    timezone=data.get("timezone"),
                    locale=data.get("locale"),
                )
        except MandatoryCategory as error:
            raise ApiError(
                409,
                "mandatory_category",
                f"{error.category_key!r} is mandatory (security, payments) and cannot be "
                "turned off.",
                field=f"categories.{error.category_key}.{error.channel}",
            ) from None
        except UnknownCell as error:
            raise ApiError(422, "unknown_preference", str(error), field=error.field) from None
        return Response(preferences_document(recipient=recipient))


class UserTokenApi(APIView):
    required_scope = Scope.USERS_TOKENS

    @extend_schema(
        operation_id="create_user_token",
        extensions=linked_from("upsert_user", ("200", "201"), user_id="$request.path.user_id"),
        request=None,
        responses={201: UserTokenOut},
        summary="A short-lived token for this user's own feed, count and preferences.",
    )
    def post(self, request: Request, user_id: str) -> Response:
        if isinstance(request.user, UserPrincipal):
            raise ApiError(403, "forbidden", "Only a producer key may issue user tokens.")
        recipient = recipient_or_404(user_id)
        return Response(
            {
                "token": user_token_issue(recipient_id=recipient.pk),
                "expires_in": settings.NOTIFY_USER_TOKEN_TTL_SECONDS,
            },
            status=status.HTTP_201_CREATED,
        )


class PreferenceCenterLinkOut(serializers.Serializer):
    url = serializers.URLField(help_text="The person's preference center; open it as it is.")
    expires_in = serializers.IntegerField(help_text="Seconds from now the link stays valid.")


class PreferenceCenterLinkApi(APIView):
    """The hosted preference center's address for one person: for an inbox or a settings
    screen to link to (an end-user token may ask for its own), and its revocation."""

    # A preference-center link is a credential to the person's settings, like a token.
    required_scope = {"POST": Scope.USERS_TOKENS, "DELETE": Scope.PREFERENCES_WRITE}
    user_token_allowed = True

    @extend_schema(
        operation_id="create_preference_center_link",
        request=None,
        responses={201: PreferenceCenterLinkOut},
        summary="A fresh signed link to this user's hosted preference center.",
    )
    def post(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        return Response(
            {
                "url": preference_center_url(recipient_id=recipient.pk),
                "expires_in": settings.NOTIFY_PREFERENCE_CENTER_LINK_MAX_AGE,
            },
            status=status.HTTP_201_CREATED,
        )

    @extend_schema(
        operation_id="revoke_preference_center_links",
        request=None,
        responses={204: None},
        summary="Switch off every preference-center link of this user made until now.",
    )
    def delete(self, request: Request, user_id: str) -> Response:
        recipient = recipient_or_404(user_id)
        preference_center_links_revoke(recipient=recipient)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _unsubscribe_page(
    request: HttpRequest, locale: str, *, done: Unsubscribed | None = None, ask: bool = False
) -> HttpResponse:
    """The unsubscribe link's page in the person's language (`locale`; "" for a link that
    names nobody: the default language). Never the browser's: a mail scanner or another
    person's browser may open it."""
    with person_translation(locale) as language:
        if ask:
            title, text = (
                gettext("Unsubscribe"),
                gettext("Stop receiving these messages on every channel?"),
            )
        elif done is not None:
            label = category_text(done.category, language=language).label
            title, text = (
                gettext("Unsubscribed"),
                gettext("You will no longer receive “%(category)s” messages.")
                % {"category": label},
            )
        else:
            title, text = gettext("Invalid link"), gettext("This unsubscribe link is not valid.")
        context = {"title": title, "text": text, "ask": ask, "language": language}
        status_code = 400 if done is None and not ask else 200
        return render(request, "preferences/unsubscribe.html", context, status=status_code)


@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe_view(request: HttpRequest, token: str) -> HttpResponse:
    """RFC 8058 one-click: POST unsubscribes at once (no cookies, login or redirect);
    GET only shows a button, because mail scanners fetch links."""
    scope = unsubscribe_token_read(token)
    if scope is None:
        return _unsubscribe_page(request, "")
    if request.method == "GET":
        locale = Recipient.objects.filter(pk=scope.recipient_id).values_list("locale", flat=True)
        return _unsubscribe_page(request, locale.first() or "", ask=True)
    origin = RequestOrigin(
        source=ConsentSource.EMAIL_LINK,
        ip_address=_client_ip(request),
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
    )
    done = unsubscribe(scope=scope, origin=origin)
    if done is None:
        return _unsubscribe_page(request, "")
    return _unsubscribe_page(request, done.recipient.locale, done=done)
