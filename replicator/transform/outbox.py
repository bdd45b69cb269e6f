"""Outbox routes, columnar: the outbox table's change batch -> the route's change batch.

An outbox route's events are the inserts and snapshot reads of outbox rows whose type column
names the route; each event's columns are JSON paths into its payload (or columns of the
outbox row), converted exactly to the column's type or not at all (docs/modes.md#outbox holds
the rules). All of it runs over the whole batch at once, never per row:

- the route's rows are picked with Arrow compute (op ``c``/``r``, the type column);
- ONE DuckDB statement (``transform.outbox_sql.statement``) checks each payload (valid JSON:
  DuckDB's reader, less what it accepts beyond RFC 8259: NaN, Infinity, trailing commas),
  reads each path's JSON type and exact value, and converts it by the column's rules: each
  column yields its value and, where the value breaks a rule, the reason (NULL where it
  converts);
- a row whose payload or value breaks a rule stops the batch with ``OutboxError``: the first
  such row in batch order is found from the reason columns (Arrow compute), and only that
  one row is read back to name it, its route, column, path and value.

The result is a change batch of the route (its columns typed, the outbox row's internal
columns, ``d`` where ``delete_when`` is truthy) that ``transform.stage_batch`` stages like any
table's change batch.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError
from replicator.model import change_batch as cb
from replicator.model.jsonpath import MISSING, evaluate
from replicator.transform.columns import source_kind
from replicator.transform.outbox_sql import (
    JSON_STRING,
    ORD,
    ROWS,
    Route,
    json_path,
    route_of,
    statement,
)
from replicator.transform.prepared import Statements

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.model.catalog import Catalog
    from replicator.plan.model import OutboxPlan, TablePlan

__all__ = ["OutboxError", "count_unrouted", "describe_flattening", "json_path", "route_batch"]


class OutboxError(SinkError):
    """An outbox row that cannot become an event of its route (stops the pipeline)."""


# -- the batch -------------------------------------------------------------------------------


def _type_is(column: Any, names: Any) -> Any:
    """Whether each row's type column names one of ``names`` (NULL: no), compared in the
    column's own type: text as text, integers by their decimal text, bytes by the names'
    UTF-8 bytes (bytes that are not UTF-8 name no route)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(names)
    kind = column.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) \
            or pa.types.is_fixed_size_binary(kind):
        column = column.cast(pa.binary())
        value_set = pa.array([name.encode("utf-8") for name in names], pa.binary())
    else:
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            column = column.cast(pa.string())  # integers: str(int)
        value_set = pa.array(names, pa.string())
    return pc.fill_null(pc.is_in(column, value_set=value_set), False)


def _events(batch: pa.Table) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(batch.column(cb.OP), value_set=pa.array(["c", "r"]))


def _type_mask(batch: pa.Table, spec: OutboxPlan, names: Any) -> Any:
    import numpy as np
    import pyarrow as pa

    if spec.type_column not in batch.column_names:
        return pa.array(np.zeros(batch.num_rows, dtype=bool))
    return _type_is(batch.column(spec.type_column), names)


def count_unrouted(table: TablePlan, batch: pa.Table) -> int:
    """Outbox events (inserts, snapshot rows) of ``batch`` whose type no route takes (a NULL
    type, a batch without the type column: none takes them)."""
    import pyarrow.compute as pc

    spec = table.outbox
    if spec is None or not batch.num_rows:
        return 0
    unrouted = pc.and_(_events(batch), pc.invert(_type_mask(batch, spec, spec.routed)))
    return int(pc.sum(unrouted).as_py() or 0)


def _first(mask: Any) -> int | None:
    import pyarrow.compute as pc

    index = pc.index(mask, True).as_py() if len(mask) else -1
    return None if index < 0 else index


def route_batch(table: TablePlan, batch: pa.Table, connection: Any) -> pa.Table:
    """The change batch of ``table``'s route among ``batch`` (the outbox table's), read by
    one statement on ``connection`` (prepared once per route and batch schema); a row that breaks a rule
    raises ``OutboxError`` naming the first such row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    route = route_of(table)
    spec = route.spec
    batch = batch.append_column(ORD, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
    events = _events(batch)
    unrouted = None
    if spec.unrouted == "fail":
        unrouted = _first(pc.and_(events, pc.invert(_type_mask(batch, spec, spec.routed))))
    rows = batch.filter(pc.and_(events, _type_mask(batch, spec, [spec.route])))
    if not rows.num_rows:  # none of the route's: no statement to plan (~50 ms)
        if unrouted is not None:
            _raise_unrouted(spec, batch.slice(unrouted, 1).to_pylist()[0])
        names = [c.name for c in route.columns]
        return pa.table({name: pa.array([], pa.null())
                         for name in (*names, *map(cb.before_column, names), *cb.INTERNAL_COLUMNS)})
    kinds = tuple((f.name, source_kind(f.type)) for f in rows.schema)
    payload_kind = dict(kinds).get(spec.payload_column)
    if payload_kind is None:  # no payload column: every payload is NULL
        rows = rows.append_column(spec.payload_column, pa.nulls(rows.num_rows, pa.string()))
        payload_kind = "string"
    result = _run(connection, statement(table, payload_kind, kinds), rows)
    problems = [result.column("payload_error")] + [result.column(f"e{i}")
                                                   for i in range(len(route.columns))]
    failing = _first(pc.is_valid(pc.coalesce(*problems))) if result.num_rows else None
    failed_at = None if failing is None else result.column(ORD)[failing].as_py()
    if unrouted is not None and (failed_at is None or unrouted < failed_at):
        _raise_unrouted(spec, batch.slice(unrouted, 1).to_pylist()[0])
    if failing is not None:
        _raise(table, route, batch.slice(failed_at, 1).to_pylist()[0],
               [column[failing].as_py() for column in problems])
    return _change_batch(route, rows, result)


# Per connection: statement and batch schema -> its prepared statement (``transform.prepared``).
# Binding and optimizing the statement is almost all of a small batch's cost (a 10-row batch
# of the order route: 37 of 39 ms), so each is prepared once.
_STATEMENTS = Statements(ROWS, 64)


def _run(connection: Any, sql: str, rows: pa.Table) -> pa.Table:
    """The result of ``sql`` over ``rows`` (as ``outbox_rows``), prepared once per statement
    and batch schema on ``connection``.

    The rows reach the statement through DuckDB's Python replacement scan, not a registered
    view: a view is a catalog entry, and DuckDB binds a statement that reads the catalog
    again at every EXECUTE (so does a MACRO; ``transform.outbox_sql`` has none). The scan
    resolves ``outbox_rows`` from the local variable of that name where the statement is
    bound (PREPARE, or EXECUTE should DuckDB ever bind it again): here."""
    key = (sql, rows.schema)
    prepared = _STATEMENTS.get(connection, key)
    outbox_rows = prepared.rows  # DuckDB reads it by name
    outbox_rows.table = rows
    try:
        if prepared.fresh:
            connection.execute(f"PREPARE {prepared.name} AS {sql}")
            _STATEMENTS.prepared(connection, key, prepared)
        # execute(), not sql(): the relation API binds twice (transform.stage silences
        # DuckDB's warning about the result's copy into Arrow).
        return connection.execute(f"EXECUTE {prepared.name}").to_arrow_table()
    finally:
        outbox_rows.table = None  # the batch is not kept alive by the cache


def _change_batch(route: Route, rows: pa.Table, result: pa.Table) -> pa.Table:
    """The route's columns, no before-images, the outbox rows' internal columns and op."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, Any] = {}
    for i, column in enumerate(route.columns):
        out[column.name] = result.column(f"v{i}")
    for column in route.columns:
        out[cb.before_column(column.name)] = pa.nulls(rows.num_rows, out[column.name].type)
    out[cb.OP] = pc.if_else(result.column("deleted"), pa.scalar("d"), rows.column(cb.OP))
    for name in cb.INTERNAL_COLUMNS:
        if name != cb.OP:
            out[name] = rows.column(name)
    return pa.table(out)


# -- errors (only on the way to one: a single row, read back) --------------------------------


def _type_text(value: Any) -> str | None:
    """The type column's value as the text routes are named by."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _raise_unrouted(spec: OutboxPlan, row: dict[str, Any]) -> None:
    kind = _type_text(row.get(spec.type_column))
    raise OutboxError(
        f"{_row_name(row, spec)}: no route for {spec.type_column} = {kind!r}",
        hint=f"add a route for it under outbox.routes (routes: {', '.join(spec.routed)}), "
        "or set `unrouted: ignore`")


def _row_name(row: dict[str, Any], spec: OutboxPlan) -> str:
    where = (f"at {row[cb.FILE]}:{row[cb.POS]} #{row[cb.ROW_INDEX]}" if row[cb.OP] != "r"
             else "(snapshot)")
    if spec.outbox_key:
        key = ", ".join(f"{name}={row.get(name)!r}" for name in spec.outbox_key)
        return f"{row[cb.TABLE]} row {key} {where}"
    return f"{row[cb.TABLE]} row {where}"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parsed(raw: Any) -> Any:
    """The payload as Python (numbers exact), for the message about one row."""
    text = bytes(raw).decode("utf-8") if isinstance(raw, (bytes, bytearray, memoryview)) else raw
    return json.loads(text, parse_float=Decimal, parse_constant=_reject_constant)


def _json_text(value: Any) -> str:
    """Parsed JSON as compact text, numbers with their digits."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(key, ensure_ascii=False) + ":" + _json_text(item)
                              for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _show(value: Any) -> str:
    text = _json_text(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _payload_problem(code: str, raw: Any) -> str:
    """Why the payload is not a JSON document (DuckDB's reader's words, without the echo
    of the input)."""
    import re

    if code == "null":
        return "is not JSON: it is NULL"
    if code not in ("invalid", "lenient"):
        return f"is not JSON: {code}"
    text = bytes(raw).decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
    if code == "lenient":
        outside = re.sub(JSON_STRING, "0", text)  # a value stays: "[1, \",]\"]" has no trailing comma
        found = re.search(r"(?i)nan|-?inf(inity)?", outside)
        return f"is not JSON: {found.group(0) if found else 'a trailing comma'} is not JSON"
    import duckdb

    try:
        duckdb.sql("SELECT json(?)", params=[text]).fetchall()
    except duckdb.Error as exc:
        words = str(exc).splitlines()[0].split(".  Input:")[0]
        return "is not JSON: " + words.replace("Invalid Input Error: ", "")
    return "is not JSON"


def _raise(table: TablePlan, route: Route, row: dict[str, Any], problems: list[Any]) -> None:
    spec = route.spec
    name = _row_name(row, spec)
    raw = row.get(spec.payload_column)
    if problems[0] is not None:
        if problems[0] == "scalar":
            kind = {bool: "a boolean", str: "a string", type(None): "null"}.get(
                type(_parsed(raw)), "a number")
            raise OutboxError(f"{name}, route {table.label}: the payload is {kind}, not a JSON "
                              "object", hint="the producer must write a JSON object ({...}) "
                              "into the payload column")
        raise OutboxError(f"{name}, route {table.label}: the payload ({spec.payload_column}) "
                          f"{_payload_problem(problems[0], raw)}",
                          hint="the producer must write a JSON document into the payload column")
    index = next(i for i, problem in enumerate(problems[1:]) if problem is not None)
    column, reason = route.columns[index], problems[index + 1]
    where = f"{name}, route {table.label} -> {table.target_table}"
    if reason in ("missing", "null"):
        raise OutboxError(
            f"{where}: key column {column.name} ({column.label}) is {reason} in the "
            f"{'outbox row' if column.row_column else 'payload'}",
            hint="every event of a route needs its key; fix the producer, or point the "
            "column's path at the key")
    value = row.get(column.row_column) if column.row_column else evaluate(column.steps, _parsed(raw))
    shown = repr(value) if column.row_column or value is MISSING else _show(value)
    raise OutboxError(
        f"{where}, column {column.name} ({column.label}, {column.target.describe()}): value "
        f"{shown} {reason}",
        hint="fix the producer, declare a type that holds the value"
        + ("" if column.planned.is_key else ", or set `on_error: null` on the column to load "
           "NULL instead"))


def describe_flattening(table: TablePlan) -> str:
    """``replicator plan``'s line on how run flattens a route's payloads."""
    return ("columnar: one DuckDB statement over the batch's rows of the route (json_type "
            "and json_extract per path, each rule a CASE; `plan --format json` prints it)")


def planned_statement(table: TablePlan, catalog: Catalog) -> str | None:
    """The statement ``route_batch`` runs over batches of the outbox table as the catalog
    has it (its columns' batch kinds), or None where the catalog does not know the table."""
    from replicator.source.arrow_types import INTERNAL_KINDS, source_kind_name

    names = {name.lower() for name in table.source_names}
    source = next((t for t in catalog.tables if t.name.lower() in names), None)
    if source is None:
        return None
    kinds = tuple((c.name, source_kind_name(c)) for c in source.columns)
    payload_kind = dict(kinds).get(route_of(table).spec.payload_column, "string")
    return statement(table, payload_kind, (*kinds, *((n, INTERNAL_KINDS[n]) for n in cb.INTERNAL_COLUMNS),
                                           (ORD, "int")))
