"""Bounds on rendering: time, output size, and the numbers a filter is asked to format.

Templates run inside the sender's thread pool, where there is no way to interrupt a
running computation (signals reach the main thread only; a thread cannot be killed). So
a render is bounded cooperatively, at the only places where its cost can grow:

- Output and loops. Every text and variable node counts its output against a per-field
  budget of NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS, and every loop iteration and node checks
  the NOTIFY_TEMPLATE_RENDER_SECONDS clock (`bounded_template`, the `for` tag below).
  Nested loops over large lists therefore stop within one iteration of the bound instead
  of running to their product. The clock is the rendering thread's own CPU time, not the
  wall clock: a render that waits for the GIL behind seven busy sender threads, or on a
  loaded machine, has not spun, and must not fail for it. Reading that clock is a system
  call, dear at a dozen checks per email, so a check first reads the (cheap) monotonic
  clock: a thread's CPU time cannot grow faster than the time that passes, so until half
  the CPU time left has passed on the monotonic clock the bound cannot have been reached
  (half: a margin for the two clocks' rates, which the kernel keeps apart). A field's
  deadline is set from the thread's last CPU reading when that is younger than
  CPU_READING_REUSE of the bound, plus the time since: so a thread's quick renders read
  the CPU clock about once in that share of the bound, and a slow render stops at most
  that share of the bound late.
- Computed values. A value a template computes is charged to the same size budget as
  output, before anything is built where it can be: `add` and `join` charge the size of
  their result before making it (`size_spend`; thirty nested `{% with a=b|add:b %}`
  would double a string thirty times without writing a character), and the values that
  `with` binds, `if` conditions evaluate and `firstof` chooses are charged when an
  expression computes them with a filter (a bare lookup is data already in memory, which
  the intake limits) and always when `firstof` writes its choice out. A bound passed
  inside an `if` condition, which Django's operators would swallow as "false", stays
  passed: every later charge raises it again.
- Single filter calls. One call cannot be stopped half-way, so the filters whose cost
  grows with an argument or a value's magnitude refuse what they cannot do quickly:
  `floatformat` beyond NOTIFY_TEMPLATE_MAX_DECIMALS places (`floatformat:"300000000"`
  would build a 300-million-digit number) and any number formatted by `floatformat`,
  `money` or `plural` whose exponent exceeds NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS (a payload
  string "1e999999999" is a valid Decimal). Every other allowed filter is linear in the
  size of its input, which the intake limits and the budget bounds.

What can be seen without data is refused at save (templates_admin/static_bounds.py): a literal
`floatformat` precision beyond the bound, and loops nested deeper than
NOTIFY_TEMPLATE_MAX_LOOP_DEPTH (their cost is the product of list sizes no sample shows).
A bound hit while rendering raises `RenderLimitExceeded`; at send the delivery fails
with reason `render_limit`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.template import Node, TemplateSyntaxError
from django.template.base import FilterExpression, TextNode, VariableNode, render_value_in_context
from django.template.defaulttags import (
    FirstOfNode,
    ForNode,
    IfNode,
    TemplateLiteral,
    WithNode,
    do_for,
)


class RenderLimitExceeded(TemplateSyntaxError):
    """The template needed more time, output or number size than rendering allows."""


@dataclass(slots=True)
class _Budget:
    deadline: float  # on the thread's CPU clock
    chars_left: int
    # Until the monotonic clock reaches this, the CPU clock cannot have reached the deadline.
    unchecked_until: float
    # What passed the size bound first (output or computed values), said again on every
    # later charge.
    overdrawn_by: str = ""


_budget: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "notify_template_budget", default=None
)

# A field's CPU deadline may start from a reading of the thread's CPU clock up to this
# share of the bound old: a reading is a system call (a few microseconds on a virtual
# machine, once per field: a sender's emails paid about 3 % of their CPU for it).
CPU_READING_REUSE = 0.05


class _CpuReading(threading.local):
    """This thread's last reading of its CPU clock, and the monotonic clock before it."""

    cpu = 0.0
    at = float("-inf")


_reading = _CpuReading()


def _cpu_now_at_most(now: float, seconds: float) -> float:
    """This thread's CPU clock at monotonic time `now`, or a little more: the last
    reading plus the time passed since (CPU time cannot pass faster), while that reading
    is younger than CPU_READING_REUSE of `seconds`; else a fresh reading."""
    reading = _reading
    if now - reading.at <= seconds * CPU_READING_REUSE:
        return reading.cpu + (now - reading.at)
    reading.at, reading.cpu = now, time.thread_time()
    return reading.cpu


@contextlib.contextmanager
def render_budget() -> Iterator[None]:
    """Bound what renders inside the block (one field) in time and output size."""
    token = render_budget_start()
    try:
        yield
    finally:
        render_budget_end(token)


def render_budget_start() -> contextvars.Token:
    """`render_budget` without a context manager (whose generator costs more than the
    budget on a short field): bound what renders until `render_budget_end(token)`."""
    seconds = settings.NOTIFY_TEMPLATE_RENDER_SECONDS
    now = time.monotonic()  # read before the CPU clock (see `_clock_checked`)
    return _budget.set(
        _Budget(
            deadline=_cpu_now_at_most(now, seconds) + seconds,
            chars_left=settings.NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS,
            unchecked_until=now + seconds / 2,
        )
    )


def render_budget_end(token: contextvars.Token) -> None:
    """End the budget `render_budget_start` began (the one before it applies again)."""
    _budget.reset(token)


def budget_spend(chars: int) -> None:
    """Charge `chars` of output and check the clock; raises when a bound is passed."""
    budget = _budget.get()
    if budget is None:
        return
    budget.chars_left -= chars
    if budget.chars_left < 0:
        budget.overdrawn_by = budget.overdrawn_by or (
            f"the text grows past {settings.NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS} characters"
        )
        raise RenderLimitExceeded(budget.overdrawn_by)
    now = time.monotonic()
    if now >= budget.unchecked_until:
        _clock_checked(budget, now)


def _clock_checked(budget: _Budget, now: float) -> None:
    """Read the CPU clock: raise past the deadline, else set when to read it next.

    `now` is the monotonic clock read before the CPU clock, so the CPU time spent after
    this reading is at most the monotonic time passed since `now`; half the CPU time
    left is the margin for the two clocks' rates."""
    left = budget.deadline - time.thread_time()
    if left < 0:
        raise RenderLimitExceeded(
            f"rendering takes more than {settings.NOTIFY_TEMPLATE_RENDER_SECONDS:g}s of CPU"
        )
    budget.unchecked_until = now + left / 2


class _MeteredText(TextNode):
    def render(self, context: Any) -> str:
        budget_spend(len(self.s))
        return self.s


class _MeteredVariable(VariableNode):
    def render(self, context: Any) -> str:
        budget_spend(0)  # the clock, before a filter runs
        output = super().render(context)
        budget_spend(len(output))
        return output


class _LoopTick(Node):
    """First node of every loop body: one clock check per iteration, even an empty one."""

    child_nodelists = ()

    def render(self, context: Any) -> str:
        budget_spend(0)
        return ""


def bounded_for(parser: Any, token: Any) -> ForNode:
    """Django's `for` tag, with a budget check at the start of every iteration."""
    node = do_for(parser, token)
    node.nodelist_loop.insert(0, _LoopTick())
    return node


def bounded_template(template: Any) -> Any:
    """Make a compiled template charge its output and the values it computes to the
    current budget (in place)."""
    metered = (
        (TextNode, _MeteredText),
        (VariableNode, _MeteredVariable),
        (WithNode, _MeteredWith),
        (FirstOfNode, _MeteredFirstOf),
        (IfNode, _MeteredIf),
    )
    for plain, counted in metered:
        for node in template.nodelist.get_nodes_by_type(plain):
            if type(node) is plain:
                node.__class__ = counted
    for node in template.nodelist.get_nodes_by_type(_MeteredIf):
        for condition, _ in node.conditions_nodelists:
            _conditions_metered(condition)
    return template


# --- computed values ----------------------------------------------------------------------


def value_spend(value: Any) -> None:
    """Charge the size of a value the template computed (see `value_size`)."""
    size_spend(value_size(value))


def size_spend(chars: int) -> None:
    """Charge `chars` of computed values; raises, naming the budget, once the values and
    the output pass it. Call it before building a value whose size is known beforehand
    (`add`, `join`), so the value is never built."""
    budget = _budget.get()
    if budget is None:
        return
    if chars > budget.chars_left and not budget.overdrawn_by:
        budget.overdrawn_by = (
            "the values it computes (with, firstof, if, add, join) grow past the render "
            f"budget of {settings.NOTIFY_TEMPLATE_MAX_OUTPUT_CHARS} characters"
        )
    budget_spend(chars)


def value_size(value: Any) -> int:
    """About the characters `value` prints as: a string its length, a list or dict its
    items' sizes plus one each, anything else one.

    A list is measured by what it holds, not by its length: a list of a thousand copies
    of one long string is small in memory but prints, or joins, a thousand times that.
    The cost of measuring is one step per item, never per character, and every list a
    template builds was charged by this measure when it was built.
    """
    total, pending = 0, [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += len(item)
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            total += len(item)
            pending.extend(item)
        else:
            total += 1
    return total


def _computed(expression: Any) -> bool:
    """Whether an expression makes a new value (applies a filter) rather than look one up."""
    return isinstance(expression, FilterExpression) and bool(expression.filters)


class _MeteredWith(WithNode):
    def render(self, context: Any) -> str:
        values = {}
        for key, expression in self.extra_context.items():
            values[key] = expression.resolve(context)
            if _computed(expression):
                value_spend(values[key])
        with context.push(**values):
            return self.nodelist.render(context)


class _MeteredFirstOf(FirstOfNode):
    def render(self, context: Any) -> str:
        first = ""
        for expression in self.vars:
            value = expression.resolve(context, ignore_failures=True)
            if value:
                value_spend(value)  # written out or bound as text: charged like output
                first = render_value_in_context(value, context)
                break
        if self.asvar:
            context[self.asvar] = first
            return ""
        return first


class _MeteredIf(IfNode):
    def render(self, context: Any) -> str:
        output = super().render(context)
        budget_spend(0)  # a bound passed in a condition, read as "false", is raised here
        return output


class _MeteredLiteral(TemplateLiteral):
    def eval(self, context: Any) -> Any:
        value = self.value.resolve(context, ignore_failures=True)
        if _computed(self.value):
            value_spend(value)
        return value


def _conditions_metered(condition: Any) -> None:
    """Make every operand of an `if` condition charge the value it computes (in place)."""
    if type(condition) is TemplateLiteral:
        condition.__class__ = _MeteredLiteral
        return
    for part in ("first", "second"):
        child = getattr(condition, part, None)
        if child is not None:
            _conditions_metered(child)


# --- numbers ------------------------------------------------------------------------------


def number_checked(value: Any) -> None:
    """Refuse a number too large (or small) to format quickly; non-numbers pass."""
    try:
        number = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except (InvalidOperation, ValueError, TypeError):
        return
    limit = settings.NOTIFY_TEMPLATE_MAX_NUMBER_DIGITS
    if number.is_finite() and abs(number.adjusted()) > limit:
        raise RenderLimitExceeded(f"a number has more than {limit} digits")


def decimals_checked(arg: Any) -> None:
    """Refuse a floatformat precision beyond NOTIFY_TEMPLATE_MAX_DECIMALS places."""
    places = floatformat_places(arg)
    limit = settings.NOTIFY_TEMPLATE_MAX_DECIMALS
    if places is not None and abs(places) > limit:
        raise RenderLimitExceeded(f"floatformat may show at most {limit} decimal places")


def floatformat_places(arg: Any) -> int | None:
    """The precision a floatformat argument asks for (its g/u suffixes dropped)."""
    text = str(arg).strip().rstrip("gu")
    if len(text) > 40:  # digits enough to mean "huge", without parsing them all
        return 10**40
    try:
        return int(text)
    except ValueError:
        return None
