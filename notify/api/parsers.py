"""The API's JSON parser: refuses what PostgreSQL, the JSON encoder or the stack cannot take.

DRF's own parser lets through NUL characters and lone surrogates (PostgreSQL's jsonb and
text refuse them), `NaN`, `Infinity` and `1e999` (Python reads them as non-finite floats,
which cannot be stored or sent on), and nesting deep enough to exhaust the recursion limit
(a RecursionError, i.e. a 500). Each is answered here with a 400; all but a parse failure
name the field.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import Any

from django.conf import settings
from rest_framework import exceptions, parsers

from notify.api.errors import ApiError

_BAD_CHARACTER = re.compile("[\x00\ud800-\udfff]")


def json_problem(data: Any, *, max_depth: int) -> tuple[str, str] | None:
    """(field path, message) of the first value the API refuses in parsed JSON; None if fine.

    Walks iteratively (no recursion) and stops descending at `max_depth`.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        field = ".".join(path)
        if len(path) > max_depth:
            return field, f"The JSON is nested deeper than {max_depth} levels."
        if isinstance(value, str):
            if _BAD_CHARACTER.search(value):
                return field, "Text may not contain NUL characters or lone surrogates."
        elif isinstance(value, float):
            if not math.isfinite(value):
                return field, "Numbers must be finite."
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if _BAD_CHARACTER.search(key):
                    return ".".join((*path, key.encode("utf-8", "backslashreplace").decode())), (
                        "Keys may not contain NUL characters or lone surrogates."
                    )
                stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, str(i))) for i, item in reversed(list(enumerate(value))))
    return None


def body_limit(view: object) -> int:
    """The largest body (bytes) the view takes: NOTIFY_MAX_BODY_BYTES, or the setting the
    view names in `body_limit_setting` (e.g. the batch endpoint's)."""
    name = getattr(view, "body_limit_setting", "NOTIFY_MAX_BODY_BYTES")
    return getattr(settings, name)


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with the checks above (depth: NOTIFY_API_MAX_JSON_DEPTH), reading
    at most the view's body limit (413 past it)."""

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        """The parsed body, or a 400 (`malformed_json`, or `invalid` naming the field)."""
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        limit = body_limit(parser_context.get("view"))
        too_big = ApiError(
            413, "payload_too_large", f"The request body is larger than {limit} bytes."
        )
        request = parser_context.get("request")
        declared = (request.META.get("CONTENT_LENGTH") or "0") if request is not None else "0"
        if declared.isdigit() and int(declared) > limit:
            raise too_big  # said so up front: nothing is read
        raw = stream.read(limit + 1)
        if len(raw) > limit:
            raise too_big
        try:
            text = codecs.decode(raw, encoding)
            data = json.loads(text)
        except RecursionError:
            raise exceptions.ParseError("JSON parse error - nested too deeply.") from None
        except (ValueError, LookupError) as error:  # LookupError: an unknown charset
            raise exceptions.ParseError(f"JSON parse error - {error}") from None
        problem = json_problem(data, max_depth=settings.NOTIFY_API_MAX_JSON_DEPTH)
        if problem is not None:
            field, message = problem
            raise ApiError(400, "invalid", message, field=field or None)
        return data
