"""``stage_batch``: a change batch -> staging rows, as ONE DuckDB statement over the Arrow batch.

The statement, step by step (the only staging path: docs/decisions/one-data-plane.md):

1. ``split``: an update that changed the key (its before-image columns are set) becomes a
   delete of the old row (the before-image, every column) ordered just before an insert of
   the new row;
2. ``last``: merge tables keep the last change per key (binlog order); changelog and log
   tables keep every change. The warehouse's statement over change files (``file_staging``)
   leaves this to the MERGE, which keeps the last staged change per key on every road;
3. ``judged``: the row filter and the computed columns, evaluated over those row images only;
   changelog and log tables drop inserts/reads/deletes of rows the filter never matched;
4. a c/u/r that fails the filter becomes a delete of its key (it leaves the target);
5. the staged columns: converted to their target types and masked (``transform.columns``),
   metadata and internal columns; ``STAGE_SEQ`` numbers the rows from ``first_seq``.

scd2 tables keep every change and then fold them into versions with window functions
(``transform.scd2``). DuckDB scans the Arrow batch in place; nothing loops over rows in Python.
Outbox routes are flattened columnar first (``transform.outbox``: one DuckDB statement over
the route's payloads) into a change batch of the route, staged like any table's.
"""

from __future__ import annotations

import threading
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from replicator.errors import PlanError, SinkError
from replicator.model import change_batch as cb
from replicator.model.pipeline import SOURCE_TABLE_COLUMN
from replicator.plan.dialects import DUCKDB
from replicator.plan.model import STAGE_CHANGE_SEQ, STAGE_OP, STAGE_SEQ, STAGE_TS, STAGE_VALID_TO
from replicator.plan.program import StagingQuery
from replicator.plan.statements import stage_copy, stage_expressions
from replicator.plan.statements.stage_copy import METADATA_SOURCES
from replicator.sink.staging import staging_schema
from replicator.source.arrow_types import INTERNAL_KINDS, source_kind_name, wide_decimal
from replicator.transform import scd2
from replicator.transform.columns import Params, decimal_text, q, source_kind, staged_value
from replicator.transform.expressions import (
    computed_sql,
    evaluation_error,
    filter_sql,
    result_kind,
    translatable,
)
from replicator.transform.outbox import route_batch
from replicator.transform.prepared import Statements

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import pyarrow as pa

    from replicator.model.catalog import Catalog
    from replicator.plan.dialects import Dialect
    from replicator.plan.model import PlannedColumn, TablePlan

_SUB = cb.INTERNAL_PREFIX + "sub"  # 0: the delete half of a key update, 1: everything else
_ORD = cb.INTERNAL_PREFIX + "ord"  # input order: the tie-break among equal binlog orders
_PASS = cb.INTERNAL_PREFIX + "pass"
_FINAL_OP = cb.INTERNAL_PREFIX + "final_op"
_COMPUTED = cb.INTERNAL_PREFIX + "computed_"
_ORDER = (cb.FILE_SEQ, cb.POS, cb.ROW_INDEX, _SUB, _ORD)

# Metadata target column (before identifier folding) -> the batch column holding its value.
_METADATA_SOURCES = METADATA_SOURCES

_local = threading.local()
THREADS = 1  # a batch is small, and the cores serve Spark
# Statements run with execute(), not sql(): the relation API binds a statement twice (once
# to learn its columns), and binding is most of a small batch's cost (a 10-row batch of
# shop.Order Items: 17.7 -> 13.4 ms; 50k rows: the same). DuckDB warns that execute()'s
# result is copied into Arrow: a copy of the staged rows, cheaper than the second bind.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)

# The staging statements, prepared once per connection (``transform.prepared``: binding was
# all of a small batch's 5-7 ms). One per table and batch layout; a pipeline with more tables
# than this rebinds some at every batch, as every batch did before.
_STATEMENTS = Statements("stage", 256)
# The name the driver's statements read their bind parameters from (``_HeldParams``).
_CONSTANTS = "stage_params"


class _HeldParams(Params):
    """Bind parameters read from the one-row ``stage_params``, a Python object like the batch.
    A prepared statement's ``?`` needs ``EXECUTE name(?)``, which DuckDB refuses ("this type of
    statement can't be prepared"), and ``getvariable`` binds the statement again at every
    EXECUTE; a value in the SQL text is what ``Params`` exists to prevent."""

    def bind(self, value: object) -> str:
        self.append(value)
        return f"(SELECT {q(f'p{len(self) - 1}')} FROM {_CONSTANTS})"


def _connection() -> Any:
    """One in-memory DuckDB per thread (a connection is not shared across threads)."""
    connection = getattr(_local, "connection", None)
    if connection is None:
        import duckdb

        connection = duckdb.connect(":memory:")
        # TIMESTAMP values are instants in UTC; DuckDB prints and casts them in its zone.
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(f"SET threads = {THREADS}")
        _local.connection = connection
    return connection


def batch_key(table: TablePlan) -> tuple[str, ...]:
    """The source key columns a change batch carries (a routed table's key also holds the
    source table's name, which is no column of the batch)."""
    return tuple(k for k in table.source_key if not (table.routed and k == SOURCE_TABLE_COLUMN))


def stage_batch(table: TablePlan, batch: pa.Table, *, first_seq: int = 0) -> pa.Table:
    """The staging rows of ``batch`` for ``table``; ``first_seq``: rows of the same sink
    batch staged before these (``STAGE_SEQ`` continues across slices)."""
    if table.outbox is not None:  # no filter or computed column; the payload flattened columnar
        return _columnar(table, route_batch(table, batch, _connection()), first_seq)
    if not translatable(table):
        # The plan refuses what has no DuckDB form; a batch typed unlike the plan checked
        # (a column's type changed under it) is not evaluated any other way.
        raise PlanError(f"{table.label}: the filter or a computed column cannot run over "
                        "this batch's column types",
                        hint="run `replicator plan` against the live schema")
    return _columnar(table, batch, first_seq)


def file_staging(table: TablePlan, schemas: Sequence[pa.Schema], dialect: Dialect
                 ) -> StagingQuery | None:
    """The transform step as one statement the warehouse runs over a batch's change files:
    a group of snapshot chunk files or a stream batch's files of one source table
    (``Dialect.change_files``; ``schemas``: theirs), or None where the driver stages them
    with ``stage_batch`` (columnar too): a warehouse that cannot read them, outbox routes
    (flattened first), files of different layouts, and DECIMALs over 38 digits (DuckDB
    reads those from Parquet as DOUBLE; ``stage_batch`` reads them from Arrow as exact
    text). DuckDB's statement stages every change, numbered in binlog order, and the batch's
    MERGE keeps the last per key (``statement``'s ``merge_keeps_last``); an external
    stage's (``external_staging``) keeps the last itself, as before."""
    import pyarrow as pa

    if dialect.external_stage is not None:  # the COPY matches each file's columns by name
        return external_staging(table, dialect)
    if not schemas or any(not s.equals(schemas[0]) for s in schemas[1:]):
        return None
    wide = any(pa.types.is_decimal256(field.type) for field in schemas[0])
    return _file_query(table, tuple((f.name, source_kind(f.type)) for f in schemas[0]), wide,
                       dialect)


def external_staging(table: TablePlan, dialect: Dialect) -> StagingQuery | None:
    """With an external stage (``Dialect.external_stage``): ``statement`` rendered for
    Snowflake over the raw table the batch's change files are COPYed into
    (``stage_copy``), as the INSERT into staging; the same for stream batches and snapshot
    chunk groups (the last change per key is kept for both). What differs from DuckDB's
    rendering is the dialect's: the staged values are Snowflake's casts of the raw columns
    (``stage_copy.raw_value``, typed as staged) and instants are built by
    ``Dialect.instant_from_micros``. None where the driver stages the table
    (``plan.stage_roads``: ``stage_copy.refusals``).

    Rendered once per plan object and dialect object (``_PlanAndDialect``): every batch of
    the table asks for the same statement, and rendering it cost 0.06-9 ms a batch (the
    filter and computed columns are parsed and translated by sqlglot)."""
    return _external_staging(_PlanAndDialect(table, dialect))


class _PlanAndDialect:
    """A table's plan and a dialect as a cache key, by identity: ``Dialect`` holds dicts (it
    has no hash) and a ``TablePlan``'s hash walks every column at each call. A re-plan
    builds new ``TablePlan`` objects, so its tables miss the cache and render anew; a
    cached key holds both objects, so their ids are not reused while it lives."""

    __slots__ = ("dialect", "table")

    def __init__(self, table: TablePlan, dialect: Dialect) -> None:
        self.table, self.dialect = table, dialect

    def __hash__(self) -> int:
        return hash((id(self.table), id(self.dialect)))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _PlanAndDialect) and other.table is self.table
                and other.dialect is self.dialect)


@lru_cache(maxsize=256)
def _external_staging(key: _PlanAndDialect) -> StagingQuery | None:
    table, dialect = key.table, key.dialect
    if dialect.external_stage is None or stage_copy.refusals(table):
        return None
    # The raw table's columns are all the statement reads; the filter and the computed
    # columns are ``stage_expressions``' Snowflake SQL over them.
    kinds = {name: "string" for name, _ in stage_copy.raw_columns(table, dialect)}
    params = Params()
    computed = {column: index for index, column in enumerate(table.computed_columns)}

    def staged_value(column: PlannedColumn) -> str:
        if column in computed:
            return stage_expressions.computed_value(column, q(_COMPUTED + str(computed[column])), dialect)
        return stage_copy.raw_value(column, dialect, params.bind)

    sql = statement(table, {**kinds, _ORD: "int"}, params,
                    batch=f"SELECT *, 0 AS {q(_ORD)} FROM {stage_copy.raw_name(table, dialect)}",
                    source_value=staged_value,
                    row_filter=lambda: stage_expressions.filter_sql(table),
                    computed_value=lambda column: stage_expressions.computed_sql(column, table),
                    instant=dialect.instant_from_micros)
    return StagingQuery(stage_copy.insert_staging(table, dialect, sql), tuple(params))


def _file_query(table: TablePlan, layout: tuple[tuple[str, str], ...], wide: bool,
                dialect: Dialect) -> StagingQuery | None:
    if dialect.external_stage is not None:
        return external_staging(table, dialect)
    if dialect.change_files is None or table.outbox is not None or not translatable(table):
        return None
    if wide:
        return None
    return _file_statement(table, (*layout, (_ORD, "int")),
                           dialect.change_files.format(ord=q(_ORD)))


def snapshot_staging(table: TablePlan, catalog: Catalog, dialect: Dialect) -> StagingQuery | None:
    """What the warehouse runs over a group of ``table``'s snapshot chunk files (their layout
    comes from the catalog: ``change_batch_schema`` without before-images), or None where
    the driver stages them; ``replicator plan`` prints it. A routed table: its first source."""
    names = {name.lower() for name in table.source_names}
    source = next((t for t in catalog.tables if t.name.lower() in names), None)
    if source is None:
        return None
    layout = (*((c.name, source_kind_name(c)) for c in source.columns),
              *((name, INTERNAL_KINDS[name]) for name in cb.INTERNAL_COLUMNS))
    return _file_query(table, layout, any(wide_decimal(c) for c in source.columns), dialect)


@lru_cache(maxsize=256)
def _file_statement(table: TablePlan, layout: tuple[tuple[str, str], ...], batch: str
                    ) -> StagingQuery:
    params = Params()
    sql = statement(table, dict(layout), params, batch=batch, merge_keeps_last=True)
    return StagingQuery(sql, tuple(params))


def _columnar(table: TablePlan, batch: pa.Table, first_seq: int) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    schema = staging_schema(table)
    if batch.num_rows == 0:
        return schema.empty_table()
    batch = _prepared(batch)
    result = _run(table, batch, _statement(table, _layout(batch)))
    columns = []
    for field in schema:
        column = result.column(field.name) if field.name != STAGE_SEQ else None
        if field.name in (STAGE_TS, STAGE_VALID_TO):
            column = column.cast(pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        elif field.name == STAGE_SEQ:  # the rows come in staging order
            column = pa.array(np.arange(first_seq, first_seq + result.num_rows, dtype=np.int64))
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def judge_rows(table: TablePlan, batch: pa.Table,
               columns: Sequence[PlannedColumn]) -> pa.Table:
    """Each row of ``batch`` (reads of source rows: ``verify``) as the transform step stages
    it: ``columns`` under their staging names (computed, converted and masked by the same
    SQL as ``stage_batch``), in input order, and the boolean ``JUDGED_PASS``: whether the
    row passes the table's filter. The same SQL, so verify can never expect other values
    than replication writes."""
    batch = _prepared(batch)
    params = _HeldParams()
    sql = judge_statement(table, dict(_layout(batch)), params, columns)
    return _run(table, batch, (sql, tuple(params)))


JUDGED_PASS = _PASS


def judge_statement(table: TablePlan, kinds: dict[str, str], params: Params,
                    columns: Sequence[PlannedColumn]) -> str:
    """``judge_rows``' statement: the ``judged`` step of ``statement`` and its staged columns,
    one output row per input row."""
    routed = f", {q(cb.TABLE)} AS {q(SOURCE_TABLE_COLUMN)}" if table.routed else ""
    judged = _judged_columns(table, kinds)
    computed_index = {column: index for index, column in enumerate(table.computed_columns)}
    selected = [f"{_staged(c, kinds, set(kinds), computed_index, params)} AS {q(c.staging_name)}"
                for c in columns]
    return (f"WITH read AS (SELECT *{routed} FROM batch), judged AS (SELECT "
            f"{', '.join(judged)} FROM read)\nSELECT {', '.join(selected)}, {q(_PASS)} "
            f"FROM judged ORDER BY {q(_ORD)}")


def _prepared(batch: pa.Table) -> pa.Table:
    """The batch as the statements read it: numbered (``_ORD``), DECIMALs over 38 digits as
    their exact text (DuckDB has none: ``decimal_text``)."""
    import numpy as np
    import pyarrow as pa

    batch = batch.append_column(_ORD, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
    for index, field in enumerate(batch.schema):
        if pa.types.is_decimal256(field.type):
            batch = batch.set_column(index, field.name, decimal_text(batch.column(index)))
    return batch


def _layout(batch: pa.Table) -> tuple[tuple[str, str], ...]:
    return tuple((f.name, source_kind(f.type)) for f in batch.schema)


def _run(table: TablePlan, batch: pa.Table, query: tuple[str, tuple[Any, ...]]) -> pa.Table:
    """Run a statement over the (prepared) batch; a failure names the table, the key of the
    row it fails on and, where no filter or computed column explains it, the column."""
    import duckdb

    sql, params = query
    connection = _connection()
    try:
        return _execute(connection, sql, params, batch)
    except duckdb.Error as exc:
        row = _failing_row(connection, sql, params, batch)
        key = {k: row.get(k) for k in batch_key(table)}
        # A source column's conversion (a value its target type cannot hold) is named as
        # such, even when DuckDB's words ("out of range") read like an expression's failure;
        # a computed column's or the filter's failure is Spark's error class.
        column = _failing_column(table, batch.slice(row[_ORD], 1)) if row else None
        if column is None or column.expression is not None:
            failure = evaluation_error(table, exc, key)
            if failure is not None:
                raise failure from None
        where = f" column {column.target_column} ({column.target_type.describe()})" if column else ""
        row_key = ", ".join(f"{k}={v!r}" for k, v in key.items()) or "no key"
        on = f" fails on the row with {row_key}" if row else " failed"
        raise SinkError(f"{table.label}:{where}{on}: "
                        f"{str(exc).splitlines()[0]}",
                        hint="declare a wider target type for the column "
                        "(type: NUMBER(38,s) or VARCHAR)") from None


def _execute(connection: Any, sql: str, params: tuple[Any, ...], rows: pa.Table) -> pa.Table:
    """``sql`` (its parameters ``_HeldParams``') over ``rows``, prepared once per statement,
    parameters and Arrow schema on ``connection``: the batch is read as ``batch`` and the
    parameters as ``stage_params``, through DuckDB's replacement scan of this frame's local
    variables of those names (``transform.prepared``), never a registered view."""
    key = (sql, params, rows.schema)
    prepared = _STATEMENTS.get(connection, key)
    # DuckDB reads both by name (a PREPARE in this frame); Python never does.
    batch, stage_params = prepared.rows, prepared.constants  # noqa: F841
    batch.table = rows
    try:
        if prepared.fresh:
            prepared.constants.table = _constants(params)
            connection.execute(f"PREPARE {prepared.name} AS {sql}")
            _STATEMENTS.prepared(connection, key, prepared)
        # execute(), not sql(): the relation API binds twice (see THREADS).
        return connection.execute(f"EXECUTE {prepared.name}").to_arrow_table()
    finally:
        batch.table = None  # the batch is not kept alive by the cache


def _constants(params: tuple[Any, ...]) -> pa.Table | None:
    """The one row ``_HeldParams`` reads: ``p0``, ``p1`` ... (text stays VARCHAR, bytes BLOB,
    the types ``?`` bound them as)."""
    import pyarrow as pa

    if not params:
        return None
    return pa.table({f"p{index}": pa.array([value]) for index, value in enumerate(params)})


def _failing_column(table: TablePlan, row: pa.Table) -> PlannedColumn | None:
    """The first staged column the statement fails on for this one row: each column's own
    statement (only on the way to an error)."""
    import duckdb

    connection = _connection()
    connection.register("batch", row)
    kinds = dict(_layout(row))
    try:
        # No column at all first: a failure there is the filter's (every row's op depends on
        # it; DuckDB drops the computed values no selected column reads).
        for columns in ((), *((column,) for column in table.staged_columns)):
            params = Params()
            sql = statement(table, kinds, params, columns=columns)
            try:
                connection.sql(sql, params=list(params)).to_arrow_table()
            except duckdb.Error:
                return columns[0] if columns else None
        return None
    finally:
        # A view named batch would be what a statement PREPAREd later binds to (a catalog
        # read: bound again at every EXECUTE, and reading this row).
        connection.unregister("batch")


@lru_cache(maxsize=256)
def _statement(table: TablePlan, layout: tuple[tuple[str, str], ...]) -> tuple[str, tuple[Any, ...]]:
    """The statement for batches of this layout ((column, batch kind) pairs), built once per
    table and layout: the expressions are type-checked and translated at the first batch."""
    params = _HeldParams()
    sql = statement(table, dict(layout), params)
    return sql, tuple(params)


def _failing_row(connection: Any, sql: str, params: tuple[Any, ...],
                 batch: pa.Table) -> dict[str, Any]:
    """The first row the statement fails on (bisection: ~log2(rows) EXECUTEs of the same
    prepared statement, only on the way to an error)."""
    import duckdb

    def fails(rows: pa.Table) -> bool:
        try:
            _execute(connection, sql, params, rows)
        except duckdb.Error:
            return True
        return False

    if fails(batch.slice(0, 0)):
        return {}  # it fails without any row: no row is to blame
    low, size = 0, batch.num_rows
    while size > 1:
        half = size // 2
        if fails(batch.slice(low, half)):
            size = half
        else:
            low, size = low + half, size - half  # the first half runs: the failure is later
    return batch.slice(low, 1).to_pylist()[0] if batch.num_rows else {}


def statement(table: TablePlan, kinds: dict[str, str], params: Params, *,
              batch: str | None = None, merge_keeps_last: bool = False,
              columns: Sequence[PlannedColumn] | None = None,
              source_value: Callable[[PlannedColumn], str] | None = None,
              row_filter: Callable[[], str | None] | None = None,
              computed_value: Callable[[PlannedColumn], str] | None = None,
              instant: str = DUCKDB.instant_from_micros) -> str:
    """The DuckDB statement staging a change batch whose columns have these batch kinds
    (``transform.columns.source_kind``); the batch is read as ``batch`` (the driver's: a Python
object, ``_execute``). ``STAGE_SEQ``
    counts from 0 (``first_seq`` is added to the result).

    ``batch``: the SELECT that reads the batch, as the first CTE (the warehouse runs the
    statement over a batch's change files, ``file_staging``); the statement then yields the
    staging row whole: ``STAGE_SEQ`` numbered in staging order and the timestamps typed.
    ``merge_keeps_last``: the last-change-per-key step is left out, and the batch's MERGE,
    which keeps the last staged change per key (``STAGE_SEQ``) for every road anyway, does
    it: the warehouse's statement over change files (``file_staging``). Measured on the
    bench's stream batches (docs/decisions/duckdb-apply-last-change.md): the step was a third
    of the statement's CPU (a window sorting every change by key and binlog order), while
    DuckDB runs the MERGE's ``QUALIFY ROW_NUMBER() ... = 1`` as a hashed ``arg_max``; a
    snapshot group has one read per key anyway. The filter and computed columns then run on
    every change: a failure on a change the MERGE would drop fails the warehouse's statement,
    and the driver's road (which drops it first) applies the batch. ``columns``: only these
    of the staged columns (default: all of them).

    The same statement in another warehouse's SQL (``external_staging``: Snowflake): the
    parts whose SQL differs come from these hooks. ``source_value``: a source column's
    staged value (default: DuckDB's conversions and masks), a computed column's too;
    ``row_filter``: the filter (default: ``filter_sql``, DuckDB's); ``computed_value``: a
    computed column's value (default: ``computed_sql``, DuckDB's); ``instant``: an instant from microseconds since the
    epoch (``Dialect.instant_from_micros``)."""
    names = set(kinds)
    key = batch_key(table)
    before = cb.before_columns(list(kinds), key)
    routed = f", {q(cb.TABLE)} AS {q(SOURCE_TABLE_COLUMN)}" if table.routed else ""

    if key and before:
        changed = " OR ".join(f"{q(b)} IS NOT NULL" for b in before.values())
        moved = ", ".join(f"{q(b)} AS {q(c)}" for c, b in before.items())
        split = (
            f"SELECT * REPLACE (CASE WHEN {q(cb.OP)} = 'u' AND ({changed}) THEN 'c' "
            f"ELSE {q(cb.OP)} END AS {q(cb.OP)}), 1 AS {q(_SUB)}{routed} FROM batch\n"
            f"  UNION ALL\n"
            f"  SELECT * REPLACE ({moved}{', ' if moved else ''}'d' AS {q(cb.OP)}), 0 AS {q(_SUB)}{routed} "
            f"FROM batch WHERE {q(cb.OP)} = 'u' AND ({changed})"
        )
    else:
        split = f"SELECT *, 1 AS {q(_SUB)}{routed} FROM batch"

    op = q(cb.OP)
    order = ", ".join(q(c) for c in _ORDER)
    every_change = table.keeps_every_change or table.mode == "scd2"
    if every_change or merge_keeps_last:
        last = "SELECT * FROM split"
    else:  # the last change per key; the filter and computed columns then run on it alone
        partition = ", ".join(q(k) for k in table.source_key) or "NULL"
        descending = ", ".join(f"{q(c)} DESC" for c in _ORDER)
        last = (f"SELECT * FROM split QUALIFY row_number() OVER (PARTITION BY {partition} "
                f"ORDER BY {descending}) = 1")

    judged_columns = _judged_columns(table, kinds, row_filter, computed_value)
    computed = table.computed_columns
    final_op = f"CASE WHEN {op} <> 'd' AND NOT {q(_PASS)} THEN 'd' ELSE {op} END"
    # Every change: inserts, reads and deletes of rows the filter never matched are dropped;
    # an update that fails it is a delete (the row may have matched before).
    where = f" WHERE {q(_PASS)} OR {op} = 'u'" if every_change else ""
    kept = f"SELECT *, {final_op} AS {q(_FINAL_OP)} FROM judged{where}"
    ctes = [("split", split), ("last", last),
            ("judged", f"SELECT {', '.join(judged_columns)} FROM last"), ("kept", kept)]
    final_order = order
    if table.mode == "scd2":
        ctes += scd2.version_ctes(table, names, order=_ORDER, final_op=_FINAL_OP,
                                  computed_prefix=_COMPUTED)
        final_order = f"{q(scd2.KEY_FIRST)}, {q(scd2.N)}"

    selected = []
    computed_index = {column: index for index, column in enumerate(computed)}
    for column in table.staged_columns if columns is None else columns:
        value = _staged(column, kinds, names, computed_index, params, source_value)
        selected.append(f"{value} AS {q(column.staging_name)}")
    selected.append(f"{q(_FINAL_OP)} AS {q(STAGE_OP)}")
    # Microseconds since the epoch; typed here only where the warehouse stages (the driver's
    # Arrow cast is cheaper than DuckDB's for its own path).
    micros = (lambda sql: instant.format(sql)) if batch else (lambda sql: sql)
    if table.mode == "scd2":
        selected.append(f"{micros(q(scd2.VALID_FROM) + ' * 1000')} AS {q(STAGE_TS)}")
        selected.append(f"{micros(q(scd2.VALID_TO) + ' * 1000')} AS {q(STAGE_VALID_TO)}")
        selected.append(f"{q(scd2.VERSION_SEQ)} AS {q(STAGE_CHANGE_SEQ)}")
    else:
        selected.append(f"{micros(q(cb.TS_MS) + ' * 1000')} AS {q(STAGE_TS)}")
    if batch:
        ctes.insert(0, ("batch", batch))
        selected.append(f"row_number() OVER (ORDER BY {final_order}) - 1 AS {q(STAGE_SEQ)}")
    with_ = ",\n".join(f"{name} AS (\n  {body}\n)" for name, body in ctes)
    ordered = "" if batch else f" ORDER BY {final_order}"
    return f"WITH {with_}\nSELECT {', '.join(selected)}\nFROM {ctes[-1][0]}{ordered}"


def _judged_columns(table: TablePlan, kinds: dict[str, str],
                    row_filter: Callable[[], str | None] | None = None,
                    computed_value: Callable[[PlannedColumn], str] | None = None) -> list[str]:
    """The row images' columns, whether each passes the filter, and the computed values."""
    judged_columns = ["*"]
    if row_filter is not None:
        filter_text = row_filter()
    else:
        filter_text = filter_sql(table, kinds) if table.filter else None
    judged_columns.append(f"coalesce(({filter_text}), FALSE) AS {q(_PASS)}" if filter_text
                          else f"TRUE AS {q(_PASS)}")
    for index, column in enumerate(table.computed_columns):
        value = computed_value(column) if computed_value is not None else computed_sql(column, kinds, table)
        judged_columns.append(f"({value}) AS {q(_COMPUTED + str(index))}")
    return judged_columns


def _staged(column: PlannedColumn, kinds: dict[str, str], names: set[str],
            computed_index: dict[PlannedColumn, int], params: Params,
            source_value: Callable[[PlannedColumn], str] | None = None) -> str:
    if column.role == "data":
        if column in computed_index:
            if source_value is not None:
                return source_value(column)
            sql = q(_COMPUTED + str(computed_index[column]))
            return staged_value(sql, result_kind(column), column, params)
        source = column.source_column or ""
        if source == SOURCE_TABLE_COLUMN and source not in names:
            source = SOURCE_TABLE_COLUMN  # routed: added by the split step
        elif source not in names:
            return "NULL"  # a column this batch does not carry (added to the plan since)
        if source_value is not None:
            return source_value(column)
        return staged_value(q(source), kinds.get(source, "string"), column, params)
    metadata = column.target_column.upper()
    if metadata == "_OP":
        return q(_FINAL_OP)
    if metadata == "_DELETED":
        return f"({q(_FINAL_OP)} = 'd')"
    return q(_METADATA_SOURCES[metadata])
