"""Model instances from hand-written SQL, for the few statements on the hot path that are
written once as SQL instead of being built by the ORM at every call.

Building a queryset with joins and annotations costs the worker more CPU than
PostgreSQL spends running it; a statement written once (and prepared by psycopg after a
few runs) costs neither. `ModelColumns` says which columns to select for a model under
an alias and turns those values back into an instance, with the field's own converters
(a JSON field is decoded as the ORM would), as if it had been loaded by the ORM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model, signals
from django.db.models.base import ModelState
from django.db.models.expressions import Col

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


class ModelColumns(Generic[M]):
    """Every concrete column of `model` under the SQL alias `alias`."""

    def __init__(self, model: type[M], alias: str) -> None:
        self.model = model
        self.alias = alias

    @cached_property
    def _fields(self) -> list[Any]:
        return list(self.model._meta.concrete_fields)

    @cached_property
    def sql(self) -> str:
        """The select list: `alias."column", …` in field order."""
        return ", ".join(f'{self.alias}."{field.column}"' for field in self._fields)

    @cached_property
    def width(self) -> int:
        return len(self._fields)

    @cached_property
    def _pk_index(self) -> int:
        return self._fields.index(self.model._meta.pk)

    @cached_property
    def _attnames(self) -> list[str]:
        return [field.attname for field in self._fields]

    @cached_property
    def _converters(self) -> list[tuple[int, list[Converter], Col]]:
        converters = []
        for index, field in enumerate(self._fields):
            column = Col(self.model._meta.db_table, field)
            found = connection.ops.get_db_converters(column) + field.get_db_converters(connection)
            if found:
                converters.append((index, found, column))
        return converters

    @cached_property
    def _plain(self) -> bool:
        """Whether an instance may be made without `Model.__init__`: for a whole row,
        that only sets each field's attribute and sends the init signals, which nothing
        here listens to (checked when first used)."""
        model = self.model
        return (
            model.from_db.__func__ is Model.from_db.__func__
            and not signals.pre_init.has_listeners(model)
            and not signals.post_init.has_listeners(model)
        )

    def build(self, values: Sequence[Any]) -> M:
        """An instance from `width` values in select-list order, as loaded from the
        database (not `_state.adding`)."""
        row = list(values)
        for index, converters, column in self._converters:
            for converter in converters:
                row[index] = converter(row[index], column, connection)
        if not self._plain:
            return self.model.from_db(DEFAULT_DB_ALIAS, self._attnames, row)
        # What `from_db` ends with, without `__init__`'s per-field work: on the route
        # and send paths this was a large share of the worker's CPU per row.
        instance = self.model.__new__(self.model)
        attributes = instance.__dict__
        attributes.update(zip(self._attnames, row, strict=True))
        state = attributes["_state"] = ModelState()
        # `connection` is the default database's: its alias, without the proxy's
        # per-thread lookup at every row.
        state.adding, state.db = False, DEFAULT_DB_ALIAS
        return instance

    def build_shared(self, values: Sequence[Any], built: dict[Any, M]) -> M:
        """`build`, once per primary key among the rows of one statement: a row whose
        instance is in `built` already gets that instance (the same row of the same
        snapshot), unconverted. For a model many rows of a batch share (their category),
        whose JSON columns would otherwise be decoded again for each row."""
        key = values[self._pk_index]
        instance = built.get(key)
        if instance is None:
            instance = built[key] = self.build(values)
        return instance


def instance_as_saved(model: type[M], values: dict[str, Any]) -> M:
    """An instance of a row just written, from every concrete field's value by attname
    (as `ModelColumns.build` makes one, without `Model.__init__`). Raises KeyError for a
    field not given: a missing one would be read from the database on first use."""
    instance = model.__new__(model)
    attributes = instance.__dict__
    for field in model._meta.concrete_fields:
        attributes[field.attname] = values[field.attname]
    state = attributes["_state"] = ModelState()
    state.adding, state.db = False, DEFAULT_DB_ALIAS
    return instance


# Per ModelColumns, the instances a statement's earlier rows made, by primary key.
SharedInstances = dict[ModelColumns[Any], dict[Any, Model]]


def instances_split(
    row: Sequence[Any],
    *columns: ModelColumns[Any],
    shared: SharedInstances | None = None,
) -> tuple[list[Model], Sequence[Any]]:
    """A row that selected `columns` one after the other, then other values: the
    instances, and the values after them. `shared` maps some of the columns to the
    instances already built from the statement's earlier rows (`build_shared`)."""
    instances, at = [], 0
    for part in columns:
        values = row[at : at + part.width]
        built = shared.get(part) if shared else None
        instances.append(part.build(values) if built is None else part.build_shared(values, built))
        at += part.width
    return instances, row[at:]


def related_cache(instance: Model, name: str, related: Model | None) -> None:
    """Remember `related` as `instance.<name>`, as select_related would: reading the
    attribute then costs no query."""
    instance._meta.get_field(name).set_cached_value(instance, related)


def row_probe(table: str, where: str, *, alias: str, columns: str = "*") -> str:
    """`CROSS JOIN LATERAL (SELECT columns FROM table WHERE where OFFSET 0) alias`: the
    row(s) of `table` that `where` (an equality on its key, naming the outer row) finds,
    read by one index probe per outer row.

    OFFSET 0 keeps the subquery apart, so the planner cannot merge it into a join it is
    free to reorder. On tables with no statistics yet (a new month's partition, a fresh
    install, a campaign's first minutes) such joins were planned as scans of whole tables
    for every batch; a probe per row costs the same whatever the statistics say."""
    return f"CROSS JOIN LATERAL (SELECT {columns} FROM {table} WHERE {where} OFFSET 0) {alias}"
