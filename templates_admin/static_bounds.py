"""The rendering bounds a template breaks whatever its data, refused when it is saved: a
literal `floatformat` precision beyond NOTIFY_TEMPLATE_MAX_DECIMALS, and loops nested
deeper than NOTIFY_TEMPLATE_MAX_LOOP_DEPTH (their cost is the product of list sizes no
sample shows). What only data shows is bounded while rendering (templates_admin/bounds.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.template.base import FilterExpression
from django.template.defaulttags import ForNode

from templates_admin.bounds import RenderLimitExceeded, decimals_checked


def static_bound_problems(compiled: Any) -> list[tuple[int | None, str]]:
    """(line, message) for the bounds a template breaks whatever its data."""
    problems: list[tuple[int | None, str]] = []
    depth_limit = settings.NOTIFY_TEMPLATE_MAX_LOOP_DEPTH
    for node, depth in _nodes_with_loop_depth(compiled.nodelist, 0):
        line = node.token.lineno if getattr(node, "token", None) else None
        if isinstance(node, ForNode) and depth > depth_limit:
            problems.append(
                (line, f"loops may be nested at most {depth_limit} deep; this one is {depth}.")
            )
        for expression in _expressions_of(node):
            for func, args in expression.filters:
                if getattr(func, "_filter_name", func.__name__) != "floatformat":
                    continue
                for is_lookup, arg in args:
                    if is_lookup:
                        continue
                    try:
                        decimals_checked(arg)
                    except RenderLimitExceeded as error:
                        problems.append((line, f"{error}."))
    return problems


def _nodes_with_loop_depth(nodelist: Any, depth: int) -> Iterator[tuple[Any, int]]:
    for node in nodelist:
        inner = depth + 1 if isinstance(node, ForNode) else depth
        yield node, inner
        for attr in node.child_nodelists:
            child = getattr(node, attr, None)
            if child:
                yield from _nodes_with_loop_depth(child, inner)


def _expressions_of(node: Any) -> list[FilterExpression]:
    found = [
        value
        for value in (
            getattr(node, "filter_expression", None),
            getattr(node, "sequence", None),
            *getattr(node, "vars", ()),
            *getattr(node, "extra_context", {}).values(),
        )
        if isinstance(value, FilterExpression)
    ]
    for condition, _ in getattr(node, "conditions_nodelists", ()):
        found.extend(condition_expressions(condition))
    return found


def condition_expressions(condition: Any) -> list[FilterExpression]:
    """The expressions an `{% if %}` condition evaluates (its literals, through `and`,
    `or`, `not` and the comparisons); [] for an `else` branch's None."""
    if condition is None:
        return []
    value = getattr(condition, "value", None)
    if isinstance(value, FilterExpression):
        return [value]
    found = []
    for part in ("first", "second"):
        child = getattr(condition, part, None)
        if child is not None:
            found.extend(condition_expressions(child))
    return found
