"""The template language marketing writes in: an allow-list, nothing else.

Engines built by `safe_engine` load only this library, never Django's default tags,
filters and loader tags, so `{% load %}`, `{% include %}`, `{% extends %}`, `{% debug %}`,
`{% ssi %}`, `{% url %}`, `|safe` and friends do not exist for a template author.

The locale-aware filters (plural, date, time, datetime, money) read the recipient's
locale and time zone from a context variable that `rendering` sets around each render:
Django filters do not see the template context, and a contextvar keeps rendering pure
and thread-safe.
"""

from __future__ import annotations

import contextvars
import datetime as dt
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from babel import Locale, UnknownLocaleError
from babel.dates import format_date, format_datetime, format_time
from babel.numbers import format_currency
from django import template
from django.conf import settings
from django.template import defaultfilters, defaulttags

from templates_admin.bounds import (
    bounded_for,
    decimals_checked,
    number_checked,
    size_spend,
    value_size,
)

register = template.Library()

# Tags an author may use. `comment` lets them leave notes; `with` names a long expression.
ALLOWED_TAGS = ("if", "for", "with", "comment", "firstof", "spaceless")
# Django filters that only transform text or numbers and never reach objects or files.
ALLOWED_DJANGO_FILTERS = (
    "add",
    "capfirst",
    "cut",
    "default",
    "default_if_none",
    "first",
    "floatformat",
    "join",
    "last",
    "length",
    "linebreaksbr",
    "lower",
    "pluralize",
    "slice",
    "striptags",
    "title",
    "truncatechars",
    "truncatewords",
    "upper",
    "urlencode",
    "wordcount",
    "yesno",
)
# Filters that make an optional variable safe to use without an `{% if %}` around it.
DEFAULTING_FILTERS = ("default", "default_if_none")

for _name in ALLOWED_TAGS:
    register.tag(_name, defaulttags.register.tags[_name])
for _name in ALLOWED_DJANGO_FILTERS:
    register.filters[_name] = defaultfilters.register.filters[_name]
# Loops check the render budget at every iteration (templates_admin.bounds).
register.tag("for", bounded_for)


@register.filter(name="floatformat", is_safe=True)
def floatformat(value: Any, arg: Any = -1) -> str:
    """Django's floatformat, refusing precisions and numbers it cannot format quickly."""
    decimals_checked(arg)
    number_checked(value)
    return defaultfilters.floatformat(value, arg)


@register.filter(name="add", is_safe=False)
def add(value: Any, arg: Any) -> Any:
    """Django's add, charging the string or list it joins to the render budget before
    joining it (numbers add as numbers and cost nothing)."""
    joins_text = isinstance(value, str) and isinstance(arg, str)
    joins_lists = isinstance(value, list | tuple) and isinstance(arg, list | tuple)
    if joins_text or joins_lists:
        size_spend(value_size(value) + value_size(arg))
    return defaultfilters.add(value, arg)


@register.filter(name="join", is_safe=True, needs_autoescape=True)
def join(value: Any, arg: Any, autoescape: bool = True) -> Any:
    """Django's join, charging the text it makes to the render budget before making it:
    the items, and the separator once between each two (`word|join:word` is the word's
    length squared)."""
    if isinstance(value, str | list | tuple | dict):
        size_spend(value_size(value) + len(str(arg)) * max(len(value) - 1, 0))
    return defaultfilters.join(value, arg, autoescape=autoescape)


_recipient: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar(
    "notify_template_recipient", default=("", "")
)


def recipient_settings_enter(*, locale: str, timezone: str) -> contextvars.Token:
    """Make the locale-aware filters format for this recipient until
    `recipient_settings_exit` is given the token this returns."""
    return _recipient.set((locale, timezone))


def recipient_settings_exit(token: contextvars.Token) -> None:
    """Give the locale-aware filters back the recipient they had before."""
    _recipient.reset(token)


def current_locale() -> Locale:
    """The recipient's Babel locale (`ru-RU` → ru_RU), or the default one."""
    for candidate in (_recipient.get()[0], settings.NOTIFY_DEFAULT_LOCALE, "en"):
        if not candidate:
            continue
        try:
            return Locale.parse(candidate.replace("-", "_"))
        except (UnknownLocaleError, ValueError, TypeError):
            continue
    return Locale("en")


def current_timezone() -> ZoneInfo:
    for candidate in (_recipient.get()[1], settings.NOTIFY_DEFAULT_TIMEZONE, "UTC"):
        if not candidate:
            continue
        try:
            return ZoneInfo(candidate)
        except (ZoneInfoNotFoundError, ValueError):
            continue
    return ZoneInfo("UTC")


def plural_form(count: Any, forms: str, *, locale: Locale | None = None) -> str:
    """Pick a word form by the locale's CLDR plural rule.

    `forms` lists the forms comma-separated in CLDR category order (one, few, many, other;
    a category the language lacks is simply absent): en "order,orders",
    ru "заказ,заказа,заказов" (one, few, many).
    """
    locale = locale or current_locale()
    number_checked(count)  # CLDR operands of a 10**9-digit number would take forever
    options = [part.strip() for part in str(forms).split(",")]
    try:
        number = Decimal(str(count))
    except (InvalidOperation, ValueError):
        return options[-1] if options else ""
    order = ("zero", "one", "two", "few", "many", "other")
    categories = [c for c in order if c in locale.plural_form.tags or c == "other"]
    # Authors rarely write a "zero"/"two" form; use the rule's tags they can count on.
    if len(options) < len(categories):
        categories = [c for c in categories if c not in ("zero", "two")]
    category = locale.plural_form(number)
    if category in categories and categories.index(category) < len(options):
        return options[categories.index(category)]
    return options[-1] if options else ""


@register.filter(name="plural")
def plural(count: Any, forms: str) -> str:
    """`{{ n }} {{ n|plural:"заказ,заказа,заказов" }}` → 21 заказ, 22 заказа, 25 заказов."""
    return plural_form(count, forms)


def _parse_moment(value: Any) -> dt.datetime | dt.date | None:
    if isinstance(value, dt.datetime | dt.date):
        return value
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        if len(text) == 10:
            return dt.date.fromisoformat(text)
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


def _aware(moment: dt.datetime) -> dt.datetime:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(current_timezone())


@register.filter(name="date")
def date_filter(value: Any, style: str = "medium") -> str:
    """A date (ISO string) in the recipient's locale and time zone; style short/medium/long/full."""
    moment = _parse_moment(value)
    if moment is None:
        return str(value or "")
    if isinstance(moment, dt.datetime):
        moment = _aware(moment).date()
    return format_date(moment, format=style or "medium", locale=current_locale())


@register.filter(name="time")
def time_filter(value: Any, style: str = "short") -> str:
    """A time of an ISO datetime in the recipient's time zone and locale."""
    moment = _parse_moment(value)
    if not isinstance(moment, dt.datetime):
        return str(value or "")
    return format_time(_aware(moment), format=style or "short", locale=current_locale())


@register.filter(name="datetime")
def datetime_filter(value: Any, style: str = "medium") -> str:
    """An ISO datetime in the recipient's time zone and locale."""
    moment = _parse_moment(value)
    if not isinstance(moment, dt.datetime):
        return date_filter(value, style)
    return format_datetime(_aware(moment), format=style or "medium", locale=current_locale())


@register.filter(name="money")
def money(value: Any, currency: str = "") -> str:
    """An amount in the recipient's locale: `{{ total|money:"RUB" }}` → 1 234,50 ₽."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return str(value or "")
    number_checked(amount)
    code = (currency or settings.NOTIFY_DEFAULT_CURRENCY).upper()
    return format_currency(amount, code, locale=current_locale())


ALLOWED_FILTERS = tuple(sorted(register.filters))


class SafeEngine(template.Engine):
    """A Django engine without Django's default builtins: only our allow-list exists."""

    default_builtins: list[str] = []


def safe_engine(*, autoescape: bool, debug: bool = False) -> template.Engine:
    return SafeEngine(
        autoescape=autoescape,
        debug=debug,
        builtins=["templates_admin.filters"],
        libraries={},
        loaders=[],
    )
