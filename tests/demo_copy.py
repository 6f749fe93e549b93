"""The demo data for a test (deliveries/support/demo.py's `seed_demo`), restored from a
copy of its first seeding in this test process.

`seed_demo` makes its categories, published templates and recipients in about 290
statements, 0.15 to 0.25 s of the test process's CPU, and some four hundred tests ask for
it. The first seeding into an empty database is copied table by table (`COPY … TO
STDOUT`, PostgreSQL's text format, so every value comes back as it was); later tests get
the rows back with one `COPY … FROM STDIN` per table.

Each restore gives the rows new ids, taken from the tables' own sequences, and moves the
foreign keys between them alike: state kept by id outside the database (a person's
unread count in Redis, a worker's cached category) must not carry over from one test to
the next, as it does not when `seed_demo` makes new rows. Where a demo table already has
rows, or the database was not empty at the first seeding, `seed_demo` runs as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

from tests.emptying import tables_with_rows


@dataclass
class TableCopy:
    """One table's rows as COPY's text, and where its ids are."""

    table: str
    sequence: str
    rows: list[list[str]]  # each row's fields as COPY's text writes them
    pk: int  # the id column's place in a row
    references: dict[int, str]  # a foreign key's place in a row -> the table it names
    lowest: int  # the rows' lowest id
    span: int  # their highest id less their lowest


_copies: list[TableCopy] = []


def demo_data_put() -> None:
    """The demo's rows in the test database: restored from the copy when there is one
    and none of its tables has rows; else seeded (and copied, into an empty database)."""
    from deliveries.support.demo import seed_demo

    present = tables_with_rows()
    if _copies and not set(present) & {copy.table for copy in _copies}:
        _restore()
        return
    seed_demo()
    if not _copies and not present:
        tables = tables_with_rows()
        _copies.extend(_read(table, tables) for table in tables)


def _read(table: str, copied: list[str]) -> TableCopy:
    introspection, quote = connection.introspection, connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {quote(table)} LIMIT 0")
        columns = [column.name for column in cursor.description]
        pk = introspection.get_primary_key_column(cursor, table)
        (sequence,) = introspection.get_sequences(cursor, table)
        relations = introspection.get_relations(cursor, table)
        # A SELECT: PostgreSQL copies a partitioned table out only through a query.
        query = f"COPY (SELECT * FROM {quote(table)}) TO STDOUT"
        with cursor.cursor.copy(query) as copy:
            text = b"".join(bytes(block) for block in copy).decode()
    rows = [line.split("\t") for line in text.splitlines()]
    ids = [int(row[columns.index(pk)]) for row in rows]
    return TableCopy(
        table=table,
        sequence=sequence["name"],
        rows=rows,
        pk=columns.index(pk),
        lowest=min(ids),
        span=max(ids) - min(ids),
        references={
            columns.index(column): other
            for column, (_, other) in relations.items()
            if other in copied
        },
    )


def _restore() -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        # A block of ids per table from its sequence, as inserting the rows would take.
        cursor.execute(
            "SELECT " + ", ".join("setval(%s, nextval(%s) + %s) - %s" for _ in _copies),
            [value for c in _copies for value in (c.sequence, c.sequence, c.span, c.span)],
        )
        starts = cursor.fetchone()
        shift = {c.table: start - c.lowest for c, start in zip(_copies, starts, strict=True)}
        for copy in _copies:
            moved = {copy.pk: shift[copy.table]}
            moved |= {place: shift[other] for place, other in copy.references.items()}
            lines = []
            for row in copy.rows:
                fields = list(row)
                for place, by in moved.items():
                    if fields[place] != r"\N":
                        fields[place] = str(int(fields[place]) + by)
                lines.append("\t".join(fields) + "\n")
            quoted = connection.ops.quote_name(copy.table)
            with cursor.cursor.copy(f"COPY {quoted} FROM STDIN") as writer:
                writer.write("".join(lines))
