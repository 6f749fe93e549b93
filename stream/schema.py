"""The live stream in the OpenAPI schema.

`GET /v1/users/{user_id}/stream` is a plain async Django view (Server-Sent Events are
not a DRF response), so drf-spectacular cannot see it; this postprocessing hook states
it in the schema like any other operation: its parameters with their real constraints
and every status it answers. The error answers reuse the schema's shared error shape.
"""

from __future__ import annotations

from typing import Any

from notify.api.lookups import USER_ID_MAX, USER_ID_PATTERN

STREAM_PATH = "/v1/users/{user_id}/stream"
_ID = {"type": "string", "pattern": "^[0-9]{1,18}$"}
_ERRORS = {
    400: "A malformed `device_id` or `Last-Event-ID`; `field` names it.",
    401: "No, unknown or revoked API key or user token.",
    403: "A user token for another user, or a key without `users:read`.",
    404: "No such recipient, or no such device of theirs (`unknown_device`).",
    429: "Too many open streams for this user or key; retry after Retry-After seconds.",
}


def add_stream(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: adds the stream operation."""
    paths = result.setdefault("paths", {})
    user_id = {
        "in": "path",
        "name": "user_id",
        "required": True,
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": USER_ID_MAX,
            "pattern": USER_ID_PATTERN,
        },
        "description": "The product's own id for the person.",
    }
    error = {"$ref": "#/components/schemas/ErrorResponseOut"}
    responses: dict[str, Any] = {
        "200": {
            "description": "Server-Sent Events: each event's `id` is a feed entry id and its "
            "`data` the feed entry as JSON (with `occurred_at`); comment lines keep the "
            "connection alive; the stream ends after its lifetime with `retry:` advice.",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        }
    }
    for status, description in _ERRORS.items():
        responses[str(status)] = {
            "description": description,
            "content": {"application/json": {"schema": error}},
        }
    responses["429"]["headers"] = {
        "Retry-After": {"schema": {"type": "integer", "minimum": 1}, "description": "Seconds."}
    }
    paths[STREAM_PATH] = {
        "get": {
            "operationId": "stream_feed",
            "summary": "The feed, live, over Server-Sent Events.",
            "tags": ["users"],
            "security": [{"userToken": []}, {"apiKey": []}],
            "parameters": [
                user_id,
                {
                    "in": "query",
                    "name": "device_id",
                    "required": False,
                    "schema": _ID,
                    "description": "The device this connection is (its push is then "
                    "skipped while the stream shows it the entry).",
                },
                {
                    "in": "header",
                    "name": "Last-Event-ID",
                    "required": False,
                    "schema": _ID,
                    "description": "Resend the entries after this one (a reconnect).",
                },
            ],
            "responses": responses,
        }
    }
    return result
