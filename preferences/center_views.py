"""The hosted preference center: a server-rendered page behind a signed link.

GET shows the page and changes nothing (mail scanners fetch links); POST saves the form
(CSRF-protected, then a redirect back, so a reload does not post twice) or revokes every
link of the person. A link that opens nothing gets a page that says why: 400 for one we
did not make, 410 for one that expired, was revoked, or whose person was erased.

Every page is in the person's language (preferences/languages.py), never the browser's.
"""

from __future__ import annotations

from collections.abc import Callable

from django import forms
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_lazy
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods

from notify.models import Recipient
from preferences.center import (
    CenterChoices,
    CenterView,
    LinkRefusal,
    known_timezones,
    preference_center_links_revoke,
    preference_center_recipient,
    preference_center_save,
    preference_center_view,
    refused_link_locale,
)
from preferences.languages import language_name, local_moment_text, person_translation
from preferences.models import ConsentSource
from preferences.selectors import offered_languages
from preferences.services import RequestOrigin

_REFUSALS = {
    LinkRefusal.TAMPERED: (
        400,
        gettext_lazy("This link is not valid"),
        gettext_lazy(
            "The address is incomplete or was changed. Open the preferences link from one "
            "of our emails again, or copy the whole address."
        ),
    ),
    LinkRefusal.EXPIRED: (
        410,
        gettext_lazy("This link has expired"),
        gettext_lazy(
            "Preference links work for a limited time. Use the link in a more recent "
            "email, or open your preferences from the app."
        ),
    ),
    LinkRefusal.REVOKED: (
        410,
        gettext_lazy("This link was withdrawn"),
        gettext_lazy(
            "Links sent before a certain time were switched off (by you or on your "
            "behalf). Use the link in a more recent email, or open your preferences from "
            "the app."
        ),
    ),
    LinkRefusal.GONE: (
        410,
        gettext_lazy("Nothing to show"),
        gettext_lazy("There are no preferences kept for this link any more."),
    ),
}


class SettingsForm(forms.Form):
    """Quiet hours, time zone and language; the cells are read from the post directly."""

    quiet_start = forms.TimeField(
        input_formats=["%H:%M", "%H:%M:%S"], label=gettext_lazy("Quiet from")
    )
    quiet_end = forms.TimeField(
        input_formats=["%H:%M", "%H:%M:%S"], label=gettext_lazy("Quiet until")
    )
    timezone = forms.ChoiceField(label=gettext_lazy("Time zone"))
    locale = forms.ChoiceField(label=gettext_lazy("Language"), required=False)

    def __init__(self, *args, current_locale: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["timezone"].choices = [(zone, zone) for zone in known_timezones()]
        self.fields["locale"].choices = [("", gettext_lazy("Not set"))] + [
            (tag, tag) for tag in offered_languages(current=current_locale)
        ]


def _cell_keys(values: list[str]) -> set[tuple[str, str]]:
    """`category:channel` values from the form, as pairs (the channel never holds ':')."""
    pairs = set()
    for value in values:
        key, _, channel = value.rpartition(":")
        if key and channel:
            pairs.add((key, channel))
    return pairs


def _options(
    values: list[str] | tuple[str, ...], selected: str, name: Callable[[str], str] = str
) -> SafeString:
    """A select's options as HTML, built here: Django's widget renders a template per
    option, which for the ~600 time zones costs the page most of its time. `name(value)`
    is what an option shows."""
    return mark_safe(  # every value and name is escaped
        "".join(
            f'<option value="{escape(v)}"{" selected" if v == selected else ""}>'
            f"{escape(name(v) if v else gettext('Not set'))}</option>"
            for v in values
        )
    )


def _page(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    response = render(request, template, context, status=status)
    # The link is a credential: keep it out of caches, search engines and Referer headers.
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    return response


def _refused(request: HttpRequest, refusal: LinkRefusal, token: str) -> HttpResponse:
    status, title, text = _REFUSALS[refusal]
    with person_translation(refused_link_locale(token=token)) as language:
        return _page(
            request,
            "preferences/center_refused.html",
            {"title": title, "text": text, "reason": refusal.value, "language": language},
            status=status,
        )


def _center(
    request: HttpRequest, view: CenterView, form: SettingsForm, *, status: int = 200, **extra
) -> HttpResponse:
    chosen = form.data if form.is_bound else form.initial
    options = {
        "timezone_options": _options(known_timezones(), chosen.get("timezone") or ""),
        "locale_options": _options(
            ["", *offered_languages(current=view.locale)],
            chosen.get("locale") or "",
            language_name,
        ),
    }
    context = {"view": view, "form": form, "language": view.language, **options, **extra}
    return _page(request, "preferences/center.html", context, status=status)


@csrf_protect
@require_http_methods(["GET", "POST"])
def preference_center_page(request: HttpRequest, token: str) -> HttpResponse:
    """The preference center for the person the link names."""
    recipient = preference_center_recipient(token=token)
    if isinstance(recipient, LinkRefusal):
        return _refused(request, recipient, token)
    with person_translation(recipient.locale) as language:
        return _center_page(request, recipient, language)


def _center_page(request: HttpRequest, recipient: Recipient, language: str) -> HttpResponse:
    if request.method == "POST" and request.POST.get("action") == "revoke":
        until = preference_center_links_revoke(recipient=recipient)
        until_text = local_moment_text(until, locale=recipient.locale, timezone=recipient.timezone)
        context = {"language": language, "until": until_text}
        return _page(request, "preferences/center_revoked.html", context)
    view = preference_center_view(recipient=recipient)
    if request.method == "GET":
        form = SettingsForm(
            initial={
                "quiet_start": view.quiet_start,
                "quiet_end": view.quiet_end,
                "timezone": view.timezone,
                "locale": view.locale,
            },
            current_locale=view.locale,
        )
        return _center(request, view, form, saved="saved" in request.GET)
    return _save(request, recipient, view)


def _save(request: HttpRequest, recipient: Recipient, view: CenterView) -> HttpResponse:
    form = SettingsForm(request.POST, current_locale=view.locale)
    if not form.is_valid():
        return _center(request, view, form, status=400)
    data = form.cleaned_data
    choices = CenterChoices(
        shown=_cell_keys(request.POST.getlist("shown")),
        ticked=_cell_keys(request.POST.getlist("cell")),
        quiet_start=data["quiet_start"].replace(second=0, microsecond=0),
        quiet_end=data["quiet_end"].replace(second=0, microsecond=0),
        timezone=data["timezone"],
        locale=data["locale"],
    )
    origin = RequestOrigin(
        source=ConsentSource.PREFERENCE_CENTER,
        ip_address=request.META.get("REMOTE_ADDR") or None,
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
    )
    preference_center_save(recipient=recipient, choices=choices, origin=origin)
    # Back to the page (303: the browser GETs it), so reloading does not post again.
    return HttpResponseRedirect(f"{request.path}?saved=1", status=303)
