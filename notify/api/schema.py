"""The OpenAPI schema (drf-spectacular), kept true: every status an operation can answer,
the error body's shape, the auth schemes and the path ids' real constraints.

The statuses every operation shares are added here by rule, from what the request
carries (a body, a user id, query parameters); what only some operations answer (409,
422) is declared on the view with `error_responses`. `check --deploy` fails on a schema
warning, and a schemathesis run against the live server (tests/contract/) checks that
the server answers only what is written here.

It is also written for client generators (openapi-python-client, openapi-typescript):
every operation has a verb id, set on its own view (`extend_schema(operation_id=...)`),
and a "one of these shapes" rule is a union of whole object components rather than
partial alternatives they cannot type. This module names no route: each app's views
state their own ids, links and scopes.
"""

from __future__ import annotations

import re

from drf_spectacular.drainage import warn
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent, force_instance
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from notify.api.lookups import USER_ID_MAX, USER_ID_PATTERN
from notify.api.serializers import ErrorOut

_ERROR_DESCRIPTIONS = {
    400: "Invalid input; `field` names the part at fault (body, path id or query). No text "
    "in a body, the keys of free-form objects included, may hold a NUL character or a "
    "lone surrogate.",
    401: "No, unknown or revoked API key or user token.",
    403: "The API key lacks the operation's scope or the category, or a user token is "
    "used on another user's data or on a producer operation.",
    404: "No such recipient or resource (or not this producer's).",
    409: "Conflicts with the resource's state.",
    413: "The request body is larger than the operation's limit.",
    422: "Well-formed, but names something that does not exist (a category, a recipient, "
    "a preference cell), a time outside the window allowed from now (`out_of_window`), "
    "or settings the category's own rules refuse (`invalid_settings`).",
    429: "Over the caller's rate limit (`rate_limited`), or over its producer's quota in "
    "events (`quota_exceeded`, naming the quota); retry after Retry-After seconds.",
    503: "The rate limiter cannot reach Redis and is set to fail closed "
    "(NOTIFY_API_RATE_LIMIT_FAIL_OPEN=0); retry after Retry-After seconds.",
}
_RETRY_AFTER = {
    "Retry-After": {
        "schema": {"type": "integer", "minimum": 1},
        "description": "Seconds to wait before retrying.",
    }
}


class ErrorResponseOut(serializers.Serializer):
    """Every error answer: `{"error": {"code", "message", "field"?}}`."""

    error = ErrorOut()


def error_responses(*statuses: int) -> dict[int, OpenApiResponse]:
    """`responses` entries for the error statuses an operation answers besides the shared ones."""
    return {
        status: OpenApiResponse(response=ErrorResponseOut, description=_ERROR_DESCRIPTIONS[status])
        for status in statuses
    }


def shared_error_statuses(*, method: str, path: str, has_body: bool, has_query: bool) -> set[int]:
    """The error statuses an operation answers by the API's common machinery.

    Every operation needs a credential (401), may be refused by scope (403) and is rate
    limited (429, or 503 when the limiter fails closed); a body can be invalid (400) or
    too large (413); a user id in the path can be malformed (400) or unknown (404), as
    can any other id, except where the operation creates or erases by that id.
    """
    statuses = {401, 403, 429, 503}
    if has_body:
        statuses |= {400, 413}
    if has_query or "{user_id}" in path:
        statuses.add(400)
    upsert_or_erase = path.endswith("/users/{user_id}") and method in ("PUT", "DELETE")
    if "{" in path and not upsert_or_erase:
        statuses.add(404)
    return statuses


def _camel(text: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def _merged(schema: dict, keywords: dict) -> dict:
    """`schema` narrowed by `keywords`; a keyword set to None is dropped."""
    if "$ref" in schema:  # siblings of $ref are ignored in OpenAPI 3.0
        schema = {"allOf": [schema]}
    merged = {**schema, **keywords}
    return {key: value for key, value in merged.items() if value is not None}


def _alternative(base: dict, rule: dict) -> tuple[str, dict]:
    """One alternative of a "one of these shapes" rule as a whole object schema, and the
    suffix its component is named with: the value it pins (`kind: webpush` → Webpush), or
    else the fields it requires (`ids` → ByIds)."""
    properties = dict(base.get("properties", {}))
    for name, keywords in rule.get("properties", {}).items():
        field_schema = properties.get(name, {})
        if "enum" in keywords and "enum" in field_schema:
            # Narrowed to some of its values: what described all of them no longer fits.
            field_schema = {"type": field_schema["type"]} if "type" in field_schema else {}
        properties[name] = _merged(field_schema, keywords)
    required = sorted({*base.get("required", []), *rule.get("required", [])})
    alternative = {"type": "object", "properties": properties}
    if required:
        alternative["required"] = required
    pinned = [
        keywords["enum"][0]
        for keywords in rule.get("properties", {}).values()
        if len(keywords.get("enum", ())) == 1 and isinstance(keywords["enum"][0], str)
    ]
    if pinned:
        return _camel("_".join(pinned)), alternative
    return "By" + _camel("_".join(rule.get("required", []))), alternative


def _is_shape(schema: dict) -> bool:
    """An inline object or enum: a generator makes a class of it, once per place it is in."""
    return "properties" in schema or len(schema.get("enum", ())) > 1


class NotifyAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus the shared error answers and path id constraints."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        has_body = self.method in ("POST", "PUT", "PATCH") and self.get_request_serializer()
        has_query = any(
            parameter.get("in") == "query" for parameter in self._get_parameters() or []
        )
        statuses = shared_error_statuses(
            method=self.method, path=self.path, has_body=bool(has_body), has_query=has_query
        )
        for status in sorted(statuses):
            if str(status) in responses:
                continue
            response = self._get_response_for_code(
                OpenApiResponse(response=ErrorResponseOut, description=_ERROR_DESCRIPTIONS[status]),
                str(status),
            )
            if status in (429, 503):
                response["headers"] = _RETRY_AFTER
            responses[str(status)] = response
        return responses

    def get_operation_id(self):
        # Reached only when the view's `extend_schema` sets no `operation_id`. A warning
        # fails `check --deploy` and the schema tests: name the operation with a verb.
        warn(f"{self.method} {self.path} has no operation id: set extend_schema(operation_id=...)")
        return super().get_operation_id()

    def _map_basic_serializer(self, serializer, direction):
        # What one field cannot say (e.g. "ids or all: true"): the serializer's own
        # `openapi_extra` (JSON Schema keywords), merged into its request component;
        # its `properties` add keywords to the fields' own schemas.
        schema = super()._map_basic_serializer(serializer, direction)
        serializer = force_instance(serializer)
        if "__doc__" not in vars(type(serializer)) or not type(serializer).__doc__:
            # A base class's docstring (StrictSerializer's) says nothing about this shape.
            schema.pop("description", None)
        extra = getattr(serializer, "openapi_extra", None)
        if not extra or direction != "request":
            return schema
        alternatives = {}
        for keyword, value in extra.items():
            if keyword == "properties":
                for name, keywords in value.items():
                    properties = schema["properties"]
                    properties[name] = _merged(properties.get(name, {}), keywords)
            elif keyword in ("anyOf", "oneOf"):
                alternatives[keyword] = value
            else:
                schema[keyword] = value
        for keyword, rules in alternatives.items():
            schema = self._alternatives(serializer, direction, schema, keyword, rules)
        return schema

    def _alternatives(self, serializer, direction, base, keyword, rules) -> dict:
        """A rule "one of these shapes" (`anyOf`/`oneOf` of partial schemas, each naming
        the fields it requires or the values it pins) as a union of whole object schemas,
        each its own component: client generators turn that into one typed class per
        shape, where partial alternatives come out untyped or are skipped."""
        name = self._get_serializer_name(serializer, direction)
        # A field's own shape that every alternative shares becomes one component, not
        # one copy per alternative.
        narrowed = {field for rule in rules for field in rule.get("properties", {})}
        properties = dict(base["properties"])
        for field, schema in properties.items():
            if field not in narrowed and _is_shape(schema):
                properties[field] = self._component(f"{name}{_camel(field)}", schema)
        base = {**base, "properties": properties}
        union = []
        for rule in rules:
            suffix, alternative = _alternative(base, rule)
            union.append(self._component(f"{name}{suffix}", alternative))
        schema = {keyword: union}
        if "description" in base:
            schema["description"] = base["description"]
        return schema

    def _component(self, name: str, schema: dict) -> dict:
        """A reference to `schema`, registered as the schema component `name`."""
        component = ResolvedComponent(
            name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema
        )
        self.registry.register_on_missing(component)
        return component.ref

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        # DRF refuses an empty list with allow_empty=False; drf-spectacular omits it.
        listish = isinstance(field, serializers.ListField | serializers.ListSerializer)
        if listish and not field.allow_empty and schema.get("type") == "array":
            schema["minItems"] = max(1, schema.get("minItems", 0))
        # DRF strips a text field before its blank check, so all-blank text is refused.
        # Python strips more than ECMA's \s names (the separators \x1c-\x1f, and NEL).
        textish = isinstance(field, serializers.CharField) and schema.get("type") == "string"
        if textish and direction == "request" and field.trim_whitespace and not field.allow_blank:
            schema.setdefault("pattern", r"[^\s\u001c-\u001f\u0085]")
        return schema

    def _get_request_body(self, direction="request"):
        # A body whose rules need at least one field (`openapi_extra` with anyOf/oneOf)
        # cannot be left out: no body is refused like an empty one.
        body = super()._get_request_body(direction)
        if body:
            serializer = force_instance(self.get_request_serializer())
            extra = getattr(serializer, "openapi_extra", None) or {}
            if "anyOf" in extra or "oneOf" in extra:
                body["required"] = True
        return body

    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            if parameter["name"] == "user_id":
                parameter["schema"] = {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": USER_ID_MAX,
                    "pattern": USER_ID_PATTERN,
                }
                parameter["description"] = "The product's own id for the person."
        return parameters


class ApiKeyScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer <api key>`: every operation accepts a producer's key."""

    target_class = "notify.api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A producer's API key (`create_producer` prints one).",
        }


class UserTokenScheme(OpenApiAuthenticationExtension):
    """`Authorization: Bearer ut_…`: only the end-user operations, on the user's own data."""

    target_class = "notify.api.auth.UserTokenAuthentication"
    name = "userToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A short-lived end-user token from POST /v1/users/{user_id}/tokens.",
        }

    def get_security_requirement(self, auto_schema):
        if getattr(auto_schema.view, "user_token_allowed", False):
            return {self.name: []}
        return []


# Where an answer's id leads (OpenAPI links): a client, and the fuzzer's stateful phase,
# follow them from a created resource to the operations on it. Each operation states the
# answers it is reached from, so it names only operations it builds on (its own app's or
# those below), never one above.
LINKED_FROM = "x-linked-from"


def linked_from(operation_id: str, statuses: tuple[str, ...], **parameters: str) -> dict:
    """`extend_schema(extensions=...)` for an operation reached from another's answer.

    `operation_id`'s answers with these `statuses` link here, each parameter of this
    operation filled by a runtime expression (`$response.body#/id`, `$request.path.x`).
    """
    return {
        LINKED_FROM: [
            {"operationId": operation_id, "status": status, "parameters": parameters}
            for status in statuses
        ]
    }


def add_links(result, generator, request, public):
    """drf-spectacular postprocessing hook: each operation's `linked_from` declarations
    as links on the answers they name (and the declarations taken out of the schema)."""
    operations = [
        operation
        for item in result.get("paths", {}).values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    ]
    by_id = {operation["operationId"]: operation for operation in operations}
    for target in operations:
        for source in target.pop(LINKED_FROM, []):
            origin = by_id.get(source["operationId"], {})
            response = origin.get("responses", {}).get(source["status"])
            if response is None:
                warn(
                    f"{target['operationId']} is linked from {source['operationId']} "
                    f"{source['status']}, which the schema does not have"
                )
                continue
            response.setdefault("links", {})[target["operationId"]] = {
                "operationId": target["operationId"],
                "parameters": source["parameters"],
            }
    return result
