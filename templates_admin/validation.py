"""Validation on save: a broken template is refused before anyone receives it.

Four checks, every problem reported in the marketer's words with the field (and line):
1. the language: only the allow-listed tags and filters of `templates_admin.filters`;
2. syntax, with the line of the error;
3. variables: every variable exists in the category's payload schema (or is a recipient
   field or a loop variable); a variable the schema does not require must be tested with
   `{% if %}` or given a `|default:"…"`;
4. channel limits, rendered with each of the category's sample payloads: push title and
   body lengths, SMS segments (GSM-7 vs UCS-2), and a link that is an http(s) URL or a
   path on the product's site (`templates_admin.limits`);
and the render bounds that hold whatever the data (`templates_admin.bounds`): loop
nesting and floatformat precision. Sample renders run under the same time and output
bounds as sending.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from django.template import TemplateSyntaxError
from django.template.base import FilterExpression, Lexer, TokenType, Variable, VariableNode
from django.template.defaulttags import FirstOfNode, ForNode, IfNode, WithNode

from notify.models import Channel
from templates_admin.filters import ALLOWED_FILTERS, ALLOWED_TAGS, DEFAULTING_FILTERS, safe_engine
from templates_admin.limits import link_source_problems, sample_problems
from templates_admin.limits import sms_segments as sms_segments  # re-exported: callers' import
from templates_admin.models import Template, TemplateVersion
from templates_admin.rendering import (
    DIGEST_SCHEMA,
    DIGEST_VARIABLE,
    build_context,
    digest_sample_context,
    render_version,
)
from templates_admin.static_bounds import condition_expressions, static_bound_problems

# Fields each channel uses; the others are ignored (and must stay empty in the form).
CHANNEL_FIELDS: dict[str, tuple[str, ...]] = {
    Channel.EMAIL: ("subject", "html_body", "text_body"),
    Channel.WEBPUSH: ("title", "body", "url"),
    Channel.FCM: ("title", "body", "url"),
    Channel.INAPP: ("title", "body", "url"),
    Channel.SMS: ("body",),
}
REQUIRED_FIELDS: dict[str, tuple[str, ...]] = {
    Channel.EMAIL: ("subject", "html_body"),
    Channel.WEBPUSH: ("title",),
    Channel.FCM: ("title",),
    Channel.INAPP: ("title",),
    Channel.SMS: ("body",),
}
FIELD_LABELS = {
    "subject": "Subject",
    "html_body": "HTML body",
    "text_body": "Text body",
    "title": "Title",
    "body": "Body",
    "url": "Link",
}
# Fields of `recipient` a template may read (see deliveries: build_context).
RECIPIENT_FIELDS = ("user_id", "locale", "timezone")
_CLOSING_TAGS = {
    "if": ("elif", "else", "endif"),
    "for": ("empty", "endfor"),
    "with": ("endwith",),
    "comment": ("endcomment",),
    "spaceless": ("endspaceless",),
}
_ALLOWED_BLOCK_WORDS = set(ALLOWED_TAGS) | {w for ws in _CLOSING_TAGS.values() for w in ws}

_SCALAR_TYPES = ("string", "integer", "number", "boolean")

_CHECK_ENGINE = safe_engine(autoescape=False, debug=True)


@dataclass(frozen=True)
class Problem:
    """One reason a template cannot be saved, addressed to its author."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{FIELD_LABELS.get(self.field, self.field)}: {self.message}"


# --- 1 + 2: the language and the syntax ---------------------------------------------------


def _language_problems(field: str, source: str) -> list[Problem]:
    problems = []
    for token in Lexer(source).tokenize():
        if token.token_type != TokenType.BLOCK:
            continue
        word = token.contents.split()[0] if token.contents.split() else ""
        if word and word not in _ALLOWED_BLOCK_WORDS:
            problems.append(
                Problem(
                    field,
                    f"line {token.lineno}: the tag {{% {word} %}} is not allowed in templates. "
                    f"You can use: {', '.join(ALLOWED_TAGS)}.",
                )
            )
    return problems


def _compile(field: str, source: str) -> tuple[Any, list[Problem]]:
    try:
        return _CHECK_ENGINE.from_string(source), []
    except TemplateSyntaxError as error:
        line = getattr(error, "template_debug", {}).get("line")
        where = f"line {line}: " if line else ""
        text = str(error)
        if text.startswith("Invalid filter"):
            text += f". You can use these filters: {', '.join(ALLOWED_FILTERS)}"
        return None, [Problem(field, f"{where}{_plain(text)}.".replace("..", "."))]


def _plain(text: str) -> str:
    # Django's hint is for developers; marketers cannot register or load anything.
    return text.replace(" Did you forget to register or load this tag?", "").rstrip(".")


# --- 3: variables against the payload schema ---------------------------------------------


@dataclass
class _Use:
    name: str
    lineno: int | None
    guarded: bool


def _lookups_of(expression: Any) -> list[tuple[tuple[str, ...], bool]]:
    """(lookups, has a default filter) for every variable in a FilterExpression."""
    if not isinstance(expression, FilterExpression):
        return []
    found = []
    has_default = any(func.__name__ in DEFAULTING_FILTERS for func, _ in expression.filters)
    var = expression.var
    if isinstance(var, Variable) and var.lookups:
        found.append((tuple(var.lookups), has_default))
    for _, args in expression.filters:
        for is_lookup, arg in args:
            if is_lookup and isinstance(arg, Variable) and arg.lookups:
                found.append((tuple(arg.lookups), False))
    return found


def _walk(nodelist: Any, local: frozenset[str], guarded: frozenset[tuple[str, ...]], uses: list):
    for node in nodelist:
        line = node.token.lineno if getattr(node, "token", None) else None

        def record(expression, *, is_test=False, line=line):
            for lookups, has_default in _lookups_of(expression):
                if lookups[0] in local:
                    continue
                safe = (
                    has_default
                    or is_test
                    or any(lookups[: len(g)] == g or g[: len(lookups)] == lookups for g in guarded)
                )
                uses.append((lookups, _Use(".".join(lookups), line, safe)))

        if isinstance(node, VariableNode):
            record(node.filter_expression)
        elif isinstance(node, IfNode):
            tested: set[tuple[str, ...]] = set()
            for condition, branch in node.conditions_nodelists:
                for expression in condition_expressions(condition):
                    record(expression, is_test=True)
                    for lookups, _ in _lookups_of(expression):
                        tested.add(lookups)
                # A branch after a test knows the tested value exists; `else` may not.
                inner = guarded | frozenset(tested) if condition is not None else guarded
                _walk(branch, local, inner, uses)
        elif isinstance(node, ForNode):
            record(node.sequence)
            names = local | set(node.loopvars) | {"forloop"}
            _walk(node.nodelist_loop, frozenset(names), guarded, uses)
            _walk(node.nodelist_empty, local, guarded, uses)
        elif isinstance(node, WithNode):
            for expression in node.extra_context.values():
                record(expression)
            _walk(node.nodelist, local | set(node.extra_context), guarded, uses)
        elif isinstance(node, FirstOfNode):
            for expression in node.vars:
                record(expression, is_test=True)
        else:
            for attr in getattr(node, "child_nodelists", ()):
                child = getattr(node, attr, None)
                if child:
                    _walk(child, local, guarded, uses)


def _schema_problems(field: str, compiled: Any, schema: dict[str, Any]) -> list[Problem]:
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    uses: list[tuple[tuple[str, ...], _Use]] = []
    _walk(compiled.nodelist, frozenset(), frozenset(), uses)
    problems: list[Problem] = []
    reported: set[str] = set()
    for lookups, use in uses:
        where = f"line {use.lineno}: " if use.lineno else ""
        root = lookups[0]
        if root == "recipient":
            if len(lookups) > 1 and lookups[1] not in RECIPIENT_FIELDS:
                message = (
                    f"{where}unknown variable “{use.name}”: a recipient has only "
                    f"{', '.join('recipient.' + f for f in RECIPIENT_FIELDS)}."
                )
                if use.name not in reported:
                    problems.append(Problem(field, message))
                    reported.add(use.name)
            continue
        if root == DIGEST_VARIABLE and root not in properties:
            if use.name not in reported:
                reported.add(use.name)
                problems.append(
                    Problem(
                        field,
                        f"{where}“{use.name}” exists only on a channel this category "
                        "digests (set a digest window for this channel on the category, or "
                        "remove it).",
                    )
                )
            continue
        if root not in properties:
            if use.name in reported:
                continue
            reported.add(use.name)
            hint = difflib.get_close_matches(root, list(properties), n=1)
            known = ", ".join(sorted(properties)) or "none"
            suggestion = f" Did you mean “{hint[0]}”?" if hint else ""
            problems.append(
                Problem(
                    field,
                    f"{where}unknown variable “{root}”: this category's data has no such "
                    f"field.{suggestion} Available: {known}.",
                )
            )
            continue
        nested = properties[root] if isinstance(properties[root], dict) else {}
        sub = nested.get("properties")
        if len(lookups) > 1 and nested.get("type") in _SCALAR_TYPES:
            # `{{ name.upper }}` would call a method of the string: there is nothing to walk.
            if use.name not in reported:
                reported.add(use.name)
                problems.append(
                    Problem(
                        field,
                        f"{where}“{root}” is a single value ({nested['type']}); "
                        f"“{use.name}” does not exist. Use “{root}” with a filter instead.",
                    )
                )
            continue
        if len(lookups) > 1 and isinstance(sub, dict) and lookups[1] not in sub:
            if use.name not in reported:
                reported.add(use.name)
                problems.append(
                    Problem(
                        field,
                        f"{where}unknown variable “{root}.{lookups[1]}”: “{root}” has "
                        f"only {', '.join(sorted(sub)) or 'no fields'}.",
                    )
                )
            continue
        if root not in required and not use.guarded and f"optional:{root}" not in reported:
            reported.add(f"optional:{root}")
            problems.append(
                Problem(
                    field,
                    f"{where}“{root}” is optional and may be missing: put it inside "
                    f'{{% if {root} %}}…{{% endif %}} or write {{{{ {root}|default:"…" }}}}.',
                )
            )
    return problems


def template_source_check(*, field: str, source: str, schema: dict[str, Any]) -> list[Problem]:
    """Language, syntax and variable problems of one field's text."""
    if not source:
        return []
    problems = _language_problems(field, source)
    if problems:
        return problems
    compiled, problems = _compile(field, source)
    if problems:
        return problems
    bounds = [
        Problem(field, f"line {line}: {text}" if line else text)
        for line, text in static_bound_problems(compiled)
    ]
    return bounds + _schema_problems(field, compiled, schema)


# --- 4: channel limits over the sample payloads ------------------------------------------


def template_version_check(
    *,
    channel: str,
    locale: str,
    fields: dict[str, str],
    schema: dict[str, Any],
    sample_payloads: list[dict[str, Any]],
    digest: bool = False,
) -> list[Problem]:
    """Every problem that stops these fields from being saved as a version of a template.

    `digest`: the category digests this channel, so the template also sees `digest`
    (and is rendered with a digest of the sample payloads); elsewhere it may not use it.
    """
    problems: list[Problem] = []
    if digest:
        schema = {
            **schema,
            "properties": {**(schema.get("properties") or {}), DIGEST_VARIABLE: DIGEST_SCHEMA},
            "required": [*(schema.get("required") or []), DIGEST_VARIABLE],
        }
    used = CHANNEL_FIELDS.get(channel, ())
    for name in REQUIRED_FIELDS.get(channel, ()):
        if not (fields.get(name) or "").strip():
            problems.append(Problem(name, "this field is required for this channel."))
    for name in used:
        problems.extend(
            template_source_check(field=name, source=fields.get(name) or "", schema=schema)
        )
    if "url" in used:
        problems.extend(
            Problem("url", text) for text in link_source_problems(fields.get("url") or "")
        )
    if problems:
        return problems
    # An unsaved version: rendering is pure and never touches the database.
    draft = TemplateVersion(
        template=Template(channel=channel, locale=locale),
        **{name: fields.get(name) or "" for name in used},
    )
    for number, payload in enumerate(sample_payloads or [], start=1):
        context = build_context(
            payload, recipient={"user_id": "sample", "locale": locale, "timezone": ""}
        )
        if digest:
            context[DIGEST_VARIABLE] = digest_sample_context(sample_payloads)
        try:
            rendered = render_version(draft, context, locale=locale, truncate=False)
        except Exception as error:  # a filter failing on real data: tell the author
            problems.append(
                Problem(used[0], f"with sample payload #{number} rendering failed: {error}.")
            )
            continue
        problems.extend(Problem(*problem) for problem in sample_problems(channel, rendered, number))
    return problems


def template_payload_variables(source: str) -> set[str]:
    """The payload fields a text reads: the first name of each variable (`order` for
    `{{ order.number }}`), without loop variables, `recipient` and `digest`, which are not
    payload fields. Empty for a text that does not compile (saved texts always do)."""
    if not source:
        return set()
    compiled, problems = _compile("", source)
    if problems:
        return set()
    uses: list[tuple[tuple[str, ...], _Use]] = []
    _walk(compiled.nodelist, frozenset(), frozenset(), uses)
    return {lookups[0] for lookups, _ in uses} - {"recipient", DIGEST_VARIABLE}
