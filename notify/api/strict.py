"""Request serializers that take JSON types as they are.

DRF coerces: a text field takes 5 as "5", a boolean takes "yes", 1 and "false", an
integer takes "7". The API says (in its OpenAPI schema) what type each field has, and a
client sending another type has a bug it should hear about: a 400 naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import fields, serializers

# (field class, JSON types it takes, how the error says it); the first match wins, so
# a subclass comes before its base.
_TYPES: list[tuple[type[serializers.Field], tuple[type, ...], str]] = [
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.ListField, (list,), "a list"),
    (serializers.DictField, (dict,), "an object"),
    (serializers.ListSerializer, (list,), "a list"),
    (serializers.BaseSerializer, (dict,), "an object"),
    (serializers.JSONField, (object,), "any JSON value"),
    # The child of a ListField or DictField declared without one: anything goes.
    (fields._UnvalidatedField, (object,), "any JSON value"),
    # Text, and what travels as text: choices, times, ids.
    (serializers.Field, (str,), "a string"),
]


def json_type_problem(field: serializers.Field, value: Any) -> str | None:
    """Why `value` is not of the JSON type `field` takes (a message), or None."""
    if value is None:
        return None  # the field's own allow_null decides
    for cls, types, name in _TYPES:
        if isinstance(field, cls):
            numeric = bool not in types and types != (object,)
            if not isinstance(value, types) or (numeric and isinstance(value, bool)):
                return f"Must be {name}."
            break
    if isinstance(field, serializers.ListField):
        return next((p for item in value if (p := json_type_problem(field.child, item))), None)
    if isinstance(field, serializers.DictField):
        return next(
            (p for item in value.values() if (p := json_type_problem(field.child, item))), None
        )
    return None


class StrictSerializer(serializers.Serializer):
    """A serializer whose fields refuse values of another JSON type (400, naming it)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = {}
            for field in self._writable_fields:
                if field.field_name in data:
                    problem = json_type_problem(field, data[field.field_name])
                    if problem is not None:
                        errors[field.field_name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)
