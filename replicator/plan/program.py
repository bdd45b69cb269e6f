"""The programs a SQL sink runs, as data: ``replicator plan`` prints them, the sink executes them.

Two programs per table:

- ``setup_program``: CREATE the target, log, state (and, where staging outlives a batch, the
  staging) tables, then read the columns each of them has; ``column_changes`` turns what was
  read into the ALTERs for columns the source grew (the only statements that depend on the
  target's state), then the setup ends with ``setup_end``.
- ``batch_program``: everything one batch runs, in order: transaction control, the
  exactly-once lookup (a row means "already applied": ``ROLLBACK`` and stop), clearing and
  loading staging from the batch's Parquet files, the MERGE / changelog / scd2 statements, the
  state row and the COMMIT.

And one for a stream batch that changed several tables (``target.atomic``):
``atomic_program``, the same pieces in ONE transaction (every lookup, every load, every
table's writes and state row, one fence and COMMIT).

A ``Statement`` carries its bind parameters (values never enter SQL text) and a ``role`` the
one sink algorithm (``sink.sql.SQLSink``) acts on. Everything that differs between warehouses
is a field of the ``Dialect``; no function here branches on a dialect's name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from replicator.plan.dialects import Dialect
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.statements import (
    batch,
    bookkeeping,
    ddl,
    loading,
    merging,
    names,
    stage_copy,
    tables,
)
from replicator.plan.statements.ddl import TruncateAt
from replicator.plan.types import TargetType, describes, widened_from

# What the sink does with a statement's result:
#   run      nothing;
#   skip     a row means the batch is already applied: run ``on_skip`` and stop;
#   load     it loads staging: its result counts the rows loaded;
#   columns  its cursor description names the table's existing columns (``column_changes``).
#   fence    it must update exactly one row (the run's lease), else another run took the
#            lease: roll back and stop (``engine.state.lease``).
#   truncate a followed TRUNCATE (runs as ``run``): a merged table's DELETE (or soft delete)
#            before its MERGE, a changelog / scd2 table's record after its changes. The
#            sink's ``at_truncate`` hook (the engine's failpoint) is called where it meets
#            the table's other writes: after a merged table's, before the first record.
Role = Literal["run", "skip", "load", "columns", "key", "fence", "truncate"]

ROLLBACK = "ROLLBACK"
COMMIT = "COMMIT"
# Shown by `plan` where the batch's files go: a batch has one or more Parquet files.
FILE_PLACEHOLDER = "<each Parquet file of the batch>"
# The stage folder of one attempt at a batch (the sink names it: batch id + a random part).
FOLDER_PLACEHOLDER = "batch_attempt"


@dataclass(frozen=True)
class Statement:
    purpose: str  # "create target table", ..., "merge staged changes", "record the batch"
    sql: str
    params: tuple[Any, ...] = ()
    role: Role = "run"
    # role == "columns": which table it reads ("target", "log" or "staging")
    subject: str = ""


@dataclass(frozen=True)
class BatchKey:
    """What identifies one batch in the state table, and what its state row records."""

    pipeline: str
    table: str  # TablePlan.target_table
    batch_id: int
    end_offset: Mapping[str, Any]

    @property
    def lookup(self) -> tuple[Any, ...]:
        return (self.pipeline, self.table, self.batch_id)

    @property
    def record(self) -> tuple[Any, ...]:
        return (*self.lookup, json.dumps(dict(self.end_offset)))


ON_SKIP = (Statement("the batch is already applied: end the transaction", ROLLBACK),)


@dataclass(frozen=True)
class StagingQuery:
    """The transform step as one SELECT the warehouse runs over a batch's change files
    (``transform.stage.file_staging``): its rows are the staging rows, ``STAGE_SEQ`` and the
    timestamps included. Its first parameter is the list of files (``Dialect.change_files``);
    ``params`` are the rest (mask salts, filter constants)."""

    sql: str
    params: tuple[Any, ...] = ()


# -- setup ------------------------------------------------------------------------------------


def setup_program(table: TablePlan, dialect: Dialect) -> list[Statement]:
    """CREATE what is missing, then read the existing columns (``column_changes`` decides)."""
    out = []
    schema = tables.create_schema(table, dialect)
    if schema:
        out.append(Statement("create schema", schema))
    out.append(Statement("create target table", tables.create_target_table(table, dialect)))
    if table.log_table:
        out.append(Statement("create log table", tables.create_log_table(table, dialect)))
    out.append(Statement("create state table", bookkeeping.create_state_table(table, dialect)))
    if table.on_error == "dead_letter":
        out.append(Statement("create dead-letter table",
                             bookkeeping.create_dead_letter_table(table, dialect)))
    if not dialect.staging_per_batch:
        out.append(Statement("create staging table",
                             tables.create_staging_table(table, dialect)))
    out.append(Statement("read the target's columns",
                         tables.read_columns(names.target_name(table, dialect)),
                         role="columns", subject="target"))
    if tables.primary_key(table):
        sql, params = tables.read_primary_key(table, dialect)
        out.append(Statement("read the target's primary key", sql, params, role="key",
                             subject="target"))
    if table.log_table:
        out.append(Statement("read the log table's columns",
                             tables.read_columns(names.log_name(table, dialect)),
                             role="columns", subject="log"))
    if not dialect.staging_per_batch:
        out.append(Statement("read the staging table's columns",
                             tables.read_columns(names.staging_name(table, dialect)),
                             role="columns", subject="staging"))
    return out


def column_changes(
    table: TablePlan, dialect: Dialect, existing: Mapping[str, set[str]],
    described: Mapping[str, str | None] | None = None,
    staging_described: Mapping[str, str | None] | None = None,
) -> list[Statement]:
    """ALTERs for planned columns a table lacks (source columns added mid-stream), and a new
    staging table where its layout changed (it holds no rows between batches): other
    columns, or a column of another type as far as the driver describes it
    (``staging_described``, as ``described`` is for the target): a column re-created or
    widened in the target after a type change needs its staging column in the new type, or
    the load into staging fails, or cuts the new values to the old type.

    ``existing``: subject -> the column names read by the setup's ``columns`` statements.
    Names match case-blind: build_plan rejects names that differ only by case, and fakesnow's
    identifiers are case-insensitive.
    """
    out = []
    for subject, columns in (("target", table.columns), ("log", table.log_columns)):
        if subject not in existing:
            continue
        have = {name.lower() for name in existing[subject]}
        missing = [c for c in columns if c.target_column.lower() not in have]
        for sql in ddl.add_columns(table, missing, dialect, log=subject == "log"):
            out.append(Statement(f"add columns the {subject} table lacks", sql))
    out += _target_follows_plan(table, dialect, existing.get("target"), described or {})
    if "staging" in existing:
        have = {name.lower() for name in existing["staging"]}
        if have != {name.lower() for name, _ in tables.staging_columns(table)} or (
                staging_described is not None
                and _staging_types_differ(table, dialect, staging_described)):
            out.append(Statement("re-create the staging table in the plan's layout",
                                 tables.create_staging_table(table, dialect, replace=True)))
    return out


def retype_columns(table: TablePlan, columns: Sequence[PlannedColumn], dialect: Dialect
                   ) -> list[Statement]:
    """A type change the target cannot do in place (`type_change: recopy`): each column is
    dropped and added again in its planned type, nullable and without a DEFAULT (its values
    come back with the table's copy; until then it reads NULL)."""
    out = [Statement("drop a column whose type changed in a way the target cannot follow",
                     ddl.drop_column(table, c.target_column, dialect)) for c in columns]
    added = [dataclasses.replace(c, source_default=None, nullable=True) for c in columns]
    out += [Statement("add it again in its new type (the table's copy fills it)", sql)
            for sql in ddl.add_columns(table, added, dialect)]
    return out


def _staging_types_differ(table: TablePlan, dialect: Dialect,
                          described: Mapping[str, str | None]) -> bool:
    for name, target_type in tables.staging_columns(table):
        if target_type.kind == "json":  # staged as text (``Dialect.staging_type_name``)
            target_type = TargetType("string")
        if not describes(described.get(name.lower()), target_type, dialect):
            return True
    return False


def _target_follows_plan(table: TablePlan, dialect: Dialect, existing: set[str] | None,
                         described: Mapping[str, str | None]) -> list[Statement]:
    """Where the target lags the plan after a schema change (issue 18): a planned integer or
    decimal column narrower in the target is widened in place (INT -> BIGINT, a DECIMAL's
    precision up at the same scale), and a target column the plan no longer writes (dropped
    in MySQL, kept by `drop_column: ignore`) gets NOT NULL relaxed, or every later insert
    would fail, and its DEFAULT dropped (new rows get NULL). All are safe to run again, and run at every setup, so a run that starts with
    the catalog already past the DDL (its plan built from it) still brings the target along.
    ``described``: lower-case target column -> its type as ``Dialect.type_name`` writes it."""
    if existing is None:
        return []
    out = []
    planned = {c.target_column.lower() for c in table.columns}
    for column in table.columns:
        have = described.get(column.target_column.lower())
        if have and widened_from(have, column.target_type, dialect):
            out.append(Statement("widen a target column the source widened",
                                 ddl.alter_column_type(table, column.target_column,
                                                       column.target_type, dialect)))
    for name in sorted(existing):
        if name.lower() not in planned:
            out.append(Statement("relax NOT NULL of a column the plan no longer writes",
                                 ddl.drop_not_null(table, name, dialect)))
            out.append(Statement("drop the DEFAULT of a column the plan no longer writes",
                                 ddl.drop_default(table, name, dialect)))
    return out


def key_changes(table: TablePlan, dialect: Dialect, existing: Sequence[str] | None
                ) -> list[Statement]:
    """The plan's primary key declared on the target when the one it declares differs
    (``existing``: its key columns as the setup's ``key`` statement read them, by
    ``tables.existing_primary_key``; None: it has none): a key changed in MySQL, followed by
    a re-copy (`--snapshot always`). A target that enforces its key (DuckDB) is rebuilt, or
    every batch would break the old key's uniqueness; Snowflake's declared key, which tools
    and users read, is replaced in place (``tables.rekey_target``)."""
    planned = tables.primary_key(table)
    if existing is None or not planned or [n.lower() for n in existing] == [
            n.lower() for n in planned]:
        return []
    purpose = ("rebuild the target under the plan's primary key" if dialect.enforces_primary_key
               else "declare the plan's primary key on the target")
    return [Statement(purpose, sql)
            for sql in tables.rekey_target(table, dialect)]


def setup_end(dialect: Dialect) -> list[Statement]:
    """Where every statement opens a transaction, the column reads leave one open."""
    return [Statement("end the setup", COMMIT)] if dialect.implicit_transactions else []


# -- one batch --------------------------------------------------------------------------------


def batch_head(table: TablePlan, dialect: Dialect, key: BatchKey | None = None) -> list[Statement]:
    """Up to the staging load: open the transaction, skip an applied batch, clear staging."""
    return [*transaction_begin(dialect), lookup(table, dialect, key),
            *staging_head(table, dialect)]


def transaction_begin(dialect: Dialect) -> list[Statement]:
    if dialect.begin_transaction:
        return [Statement("begin the batch's transaction", dialect.begin_transaction)]
    return []


def lookup(table: TablePlan, dialect: Dialect, key: BatchKey | None = None) -> Statement:
    """The exactly-once check: a row means the table's batch is applied already."""
    return Statement("skip a batch already applied", bookkeeping.state_lookup(table, dialect),
                     params=key.lookup if key else (), role="skip")


def staging_head(table: TablePlan, dialect: Dialect) -> list[Statement]:
    out = []
    if dialect.staging_per_batch:
        out.append(Statement("create staging table",
                             tables.create_staging_table(table, dialect)))
    out.append(Statement("clear staging", loading.clear_staging(table, dialect)))
    return out


def load_statements(
    table: TablePlan, dialect: Dialect, files: Sequence[str] | None = None, folder: str = "",
    query: StagingQuery | None = None,
) -> list[Statement]:
    """Load the batch's Parquet files (already in the staging layout) into staging.

    ``files=None`` renders the program for `plan` with a placeholder; an empty list loads
    nothing. Warehouses that load through a stage (Snowflake) PUT each file into ``folder``
    of the staging table's stage, a folder of this attempt's own, and COPY that folder by
    column name; the others read the files in place (DuckDB's ``read_parquet``).

    With ``query`` the files are change files (the landing zone's, not yet staged) and the
    warehouse runs the transform step over them into staging (``Dialect.change_files``).
    """
    if files is not None and not files:
        return []
    if query is not None and dialect.external_stage:
        # ``query`` is the INSERT from the raw table (``transform.stage.external_staging``;
        # the files are named in the COPY, not bound).
        return [Statement("empty the raw table, in the plan's layout",
                          stage_copy.create_raw_table(table, dialect)),
                *(Statement("load the batch's change files from the external stage, by name",
                            sql) for sql in stage_copy.copy_into_raw(table, dialect, files)),
                Statement("stage the change rows: the transform step, run by the warehouse",
                          query.sql, params=query.params, role="load")]
    if query is not None:
        out = []
        if dialect.utc_session:
            out.append(Statement("read instants in UTC, as the transform step assumes",
                                 dialect.utc_session))
        # `plan` shows no parameters (a mask's salt is one).
        params = (list(files), *query.params) if files is not None else ()
        out.append(Statement("stage the batch's change files: the transform step, run by "
                             "the warehouse", loading.insert_staging(table, dialect, query.sql),
                             params=params, role="load"))
        return out
    if dialect.load_through_stage:
        folder = folder or FOLDER_PLACEHOLDER
        put = [
            Statement("upload a Parquet file to the staging table's stage",
                      loading.put_file(table, dialect, path, folder))
            for path in (files if files is not None else [FILE_PLACEHOLDER])
        ]
        return [*put, Statement("load staging from the uploaded files",
                                loading.copy_into_staging(table, dialect, folder),
                                role="load")]
    return [Statement("load staging from the batch's Parquet files",
                      loading.insert_staging_from_files(table, dialect),
                      params=(list(files),) if files is not None else (), role="load")]


def batch_tail(table: TablePlan, dialect: Dialect, key: BatchKey | None = None,
               dead_letters: Sequence[tuple[Any, ...]] | None = None, *, fresh: bool = False,
               generation: int | None = None, truncates: Sequence[TruncateAt] = ()
               ) -> list[Statement]:
    """After the staging load: MERGE (or append, or versions; ``fresh``: the INSERT of a copy
    into a target that was empty, ``fresh_copy``), the rows the target refused
    (``on_error: dead_letter``: one INSERT per row, parameters (key JSON, column, error); for
    `plan`, ``None`` shows one), the state row, the lease's fence (a run holding lease
    ``generation``; `plan` shows it: every run holds one), COMMIT."""
    return [*load_commit(dialect),
            *table_changes(table, dialect, key, dead_letters, fresh=fresh,
                           truncates=truncates),
            *batch_end(table, dialect, key, generation)]


def load_commit(dialect: Dialect) -> list[Statement]:
    if dialect.commit_after_load:
        return [Statement("commit the load (staging only; the MERGE opens the batch's "
                          "transaction)", COMMIT)]
    return []


def table_changes(table: TablePlan, dialect: Dialect, key: BatchKey | None = None,
                  dead_letters: Sequence[tuple[Any, ...]] | None = None, *,
                  fresh: bool = False, truncates: Sequence[TruncateAt] = ()) -> list[Statement]:
    """One table's writes of a batch, from its loaded staging: MERGE (or its mode's
    statements), the followed TRUNCATEs the batch holds (``truncate_records``: a merged
    table's before its MERGE, whose staging then holds only the changes after the TRUNCATE;
    a changelog / scd2 table's after its statements), dead letters, the state row."""
    changes = [Statement(purpose, sql)
               for purpose, sql in batch.batch_statements(table, dialect, fresh=fresh)]
    truncated = truncate_records(table, dialect, truncates)
    out = [*truncated, *changes] if table.mode == "merge" else [*changes, *truncated]
    if table.on_error == "dead_letter":
        insert = bookkeeping.dead_letter_insert(table, dialect)
        offset = dict(key.end_offset) if key else {}
        where = (offset.get("file"), offset.get("pos"))
        rows = dead_letters if dead_letters is not None else ([] if key else [()])
        for row in rows:
            params = (*key.lookup, *row, *where) if key and row else ()
            out.append(Statement("set aside a row the target refuses (dead letter)", insert,
                                 params=params))
    out.append(Statement("record the batch", bookkeeping.state_insert(table, dialect),
                         params=key.record if key else ()))
    return out


def truncate_records(table: TablePlan, dialect: Dialect, truncates: Sequence[TruncateAt]
                     ) -> list[Statement]:
    """The followed TRUNCATEs of the table in the batch, as statements of its transaction.

    A merged table: one DELETE of every target row (``deletes: soft``: an UPDATE marking
    them deleted), however many TRUNCATEs the batch holds; it runs before the MERGE, and the
    engine cut the batch's changes before the last TRUNCATE, so the MERGE brings only the
    ones after it. A routed target: one such statement per truncated source table, on its
    rows only (the engine cut only that table's changes).

    A changelog or scd2 table: each TRUNCATE, in binlog order, recorded after the batch's own
    statements (``ddl.truncate_history``: those compare positions, so the batch's changes
    before the TRUNCATE count and those after it do not).

    The state row commits with them: a replay of a committed batch finds it and runs none of
    this; a batch not committed rolled back with them."""
    if not truncates:
        return []
    if table.mode == "merge":
        what = ("follow TRUNCATE TABLE: "
                + ("mark every target row deleted" if table.deletes == "soft"
                   else "delete every target row"))
        if table.routed:  # the truncated tables' rows only, each once
            shards = list(dict.fromkeys(at.source for at in truncates))
            return [Statement(what.replace("every target row", "the target rows of one "
                                           "source table") + " (the MERGE then brings the "
                              "changes after it)", ddl.truncate_rows(table, dialect),
                              params=(shard,), role="truncate") for shard in shards]
        return [Statement(what + " (the MERGE then brings the changes after it)",
                          ddl.truncate_rows(table, dialect), role="truncate")]
    what = ("end the versions current at a followed TRUNCATE TABLE" if table.mode == "scd2"
            else "record a followed TRUNCATE TABLE: a delete row per key live before it")
    return [Statement(what, ddl.truncate_history(table, dialect),
                      params=ddl.truncate_history_params(table, at), role="truncate")
            for at in truncates]


def batch_end(table: TablePlan, dialect: Dialect, key: BatchKey | None = None,
              generation: int | None = None) -> list[Statement]:
    """The lease's fence and COMMIT (``table``: any table of the batch; the lease is the
    pipeline's)."""
    out = []
    if key is None or generation is not None:
        # Last before COMMIT: a concurrent take-over waits for this batch to end.
        out.append(Statement("renew the run's lease (no row updated: another run took it, "
                             "roll back and stop)", bookkeeping.lease_renew(table, dialect),
                             params=(key.pipeline, generation) if key else (), role="fence"))
    out.append(Statement("commit the batch", COMMIT))
    return out


def batch_program(
    table: TablePlan, dialect: Dialect, key: BatchKey | None = None,
    files: Sequence[str] | None = None, folder: str = "",
    dead_letters: Sequence[tuple[Any, ...]] | None = None, query: StagingQuery | None = None,
    *, fresh: bool = False, generation: int | None = None,
    truncates: Sequence[TruncateAt] = (),
) -> list[Statement]:
    """Every statement one batch runs when it is not skipped, in order."""
    return [*batch_head(table, dialect, key),
            *load_statements(table, dialect, files, folder, query),
            *batch_tail(table, dialect, key, dead_letters, fresh=fresh, generation=generation,
                        truncates=truncates)]


@dataclass(frozen=True)
class AtomicPart:
    """One table of an atomic batch, as ``atomic_program`` takes it: its key, and (for a
    real run) the files its staging loads, their stage folder, its dead letters and its
    staging query (``load_statements``)."""

    table: TablePlan
    key: BatchKey | None = None
    files: Sequence[str] | None = None
    folder: str = ""
    dead_letters: Sequence[tuple[Any, ...]] | None = None
    query: StagingQuery | None = None
    truncates: Sequence[TruncateAt] = ()


def atomic_program(parts: Sequence[AtomicPart], dialect: Dialect, *,
                   generation: int | None = None) -> list[Statement]:
    """Every statement an atomic batch (``target.atomic``) runs, in order, when none of its
    tables is skipped: ONE transaction for all the tables the batch changed. Every table's
    lookup first (a table with a state row for the batch is left out; all of them: ROLLBACK
    and stop), then each table's staging load, then each table's MERGE, dead letters and
    state row, then the fence and one COMMIT. Where the load commits on its own
    (``commit_after_load``: staging holds only this batch), every load comes before that
    COMMIT, so the target tables and the state rows still change in one transaction."""
    if not parts:
        return []
    return [*atomic_head(parts, dialect),
            *(statement for part in parts for statement in atomic_load(part, dialect)),
            *load_commit(dialect),
            *(statement for part in parts for statement in table_changes(
                part.table, dialect, part.key, part.dead_letters, truncates=part.truncates)),
            *batch_end(parts[0].table, dialect, parts[0].key, generation)]


def atomic_head(parts: Sequence[AtomicPart], dialect: Dialect) -> list[Statement]:
    """Open the transaction, then the lookup of every table of the batch."""
    return [*transaction_begin(dialect),
            *(replace(lookup(p.table, dialect, p.key),
                      purpose=f"skip {p.table.target_table} if the batch is applied to it")
              for p in parts)]


def atomic_load(part: AtomicPart, dialect: Dialect) -> list[Statement]:
    """One table's staging: cleared, then loaded."""
    return [*staging_head(part.table, dialect),
            *load_statements(part.table, dialect, part.files, part.folder, part.query)]


def fresh_copy(table: TablePlan) -> bool:
    """Whether a copy of this table into an empty target may insert instead of merging: a
    merged table (changelog and scd2 append anyway) fed by one source table (a routed
    target's other sources share its keys' space) whose snapshot rows are its own (not an
    outbox route's events)."""
    return (table.mode == "merge" and not table.routed and table.outbox is None
            and bool(table.key_columns))


def target_has_rows(table: TablePlan, dialect: Dialect) -> Statement:
    """Read before a table's copy begins: no row means ``fresh`` batches for the copy."""
    return Statement("does the target hold rows? (none: the copy inserts instead of merging)",
                     merging.target_has_rows(table, dialect))


__all__ = [
    "COMMIT",
    "FILE_PLACEHOLDER",
    "FOLDER_PLACEHOLDER",
    "ON_SKIP",
    "ROLLBACK",
    "AtomicPart",
    "BatchKey",
    "StagingQuery",
    "Statement",
    "TruncateAt",
    "atomic_head",
    "atomic_load",
    "atomic_program",
    "batch_end",
    "batch_head",
    "batch_program",
    "batch_tail",
    "column_changes",
    "fresh_copy",
    "load_commit",
    "load_statements",
    "lookup",
    "setup_end",
    "setup_program",
    "staging_head",
    "table_changes",
    "target_has_rows",
    "transaction_begin",
    "truncate_records",
]
