"""Checking an event payload against its category's JSON schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError


@dataclass(frozen=True)
class PayloadProblem:
    field: str  # e.g. "payload.order_number"
    message: str


# Only the formats we enforce: `uri` values end up as links in emails, pushes and the
# feed, so only absolute http(s) URLs pass (no `javascript:`, `data:` or relative ones).
_FORMATS = FormatChecker(formats=())
_LINK_SCHEMES = ("http", "https")


@_FORMATS.checks("uri")
def is_link(value: object) -> bool:
    """True for an absolute http(s) URL with a host and no whitespace or control characters."""
    if not isinstance(value, str):
        return True  # `format` constrains strings only
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        return False
    return parts.scheme.lower() in _LINK_SCHEMES and bool(parts.hostname)


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=_FORMATS)


def payload_problem(schema: dict[str, Any], payload: dict[str, Any]) -> PayloadProblem | None:
    """The first way `payload` breaks `schema`, naming the field; None when it fits."""
    if not schema:
        return None
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = next(iter(sorted(validator.iter_errors(payload), key=_error_order)), None)
    if error is None:
        return None
    path = ["payload", *(str(part) for part in error.absolute_path)]
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in (error.instance or {})]
        if missing:
            path.append(missing[0])
            return PayloadProblem(".".join(path), f"'{missing[0]}' is required.")
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        if extra:
            path.append(extra[0])
            return PayloadProblem(".".join(path), f"'{extra[0]}' is not allowed here.")
    return PayloadProblem(".".join(path), error.message)


def _error_order(error: ValidationError) -> tuple[int, str]:
    return (len(error.absolute_path), ".".join(str(p) for p in error.absolute_path))


MASK = "•••"


def sensitive_fields(schema: dict[str, Any]) -> set[str]:
    """Top-level payload fields the category's schema marks `"x-sensitive": true`."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return {
        name
        for name, spec in properties.items()
        if isinstance(spec, dict) and spec.get("x-sensitive") is True
    }


def payload_masked(payload: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The payload as support may see it: sensitive values replaced by a mask."""
    hidden = sensitive_fields(schema)
    return {key: (MASK if key in hidden else value) for key, value in payload.items()}


def schema_problem(schema: Any, sample_payloads: Any) -> PayloadProblem | None:
    """What is wrong with a category's payload schema (JSON Schema, Draft 2020-12) and
    its sample payloads, naming the field; None when the schema is valid and every sample
    fits it. A broken schema would otherwise turn every event of the category into an
    error."""
    if not isinstance(schema, dict):
        return PayloadProblem("payload_schema", "The schema must be a JSON object.")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        return PayloadProblem(
            "payload_schema", f"Not a valid JSON Schema at {where}: {error.message}"
        )
    if not isinstance(sample_payloads, list):
        return PayloadProblem("sample_payloads", "The sample payloads must be a JSON list.")
    for number, sample in enumerate(sample_payloads, start=1):
        problem = payload_problem(schema, sample) if isinstance(sample, dict) else None
        if not isinstance(sample, dict) or problem is not None:
            why = problem.message if problem else "it is not a JSON object."
            return PayloadProblem(
                "sample_payloads", f"Sample payload #{number} does not fit the schema: {why}"
            )
    return None
