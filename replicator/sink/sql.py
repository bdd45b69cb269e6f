"""The one SQL sink algorithm: run the programs ``replicator plan`` prints (``plan.program``).

``SQLSink`` executes the setup program (CREATE, read columns, ALTER) and, per batch, the batch
program: the exactly-once lookup first (a row: ROLLBACK, nothing else runs and no slice is
pulled), then the staged rows become Parquet files (or the caller's files are taken as they
are), the load statements put them into staging, and the MERGE / changelog / scd2 statements
and the state row commit together; ``apply_atomic`` does it for several tables of one batch in
ONE transaction (``target.atomic``). Every statement it runs comes from ``plan.program``; the
warehouses differ only in what ``DuckDBSink`` and ``SnowflakeSink`` supply: the connection,
the driver's error classes and how they are sorted, whether one session may run one
transaction at a time, and which files the load can read. The session (cursors, errors,
retries) is ``sink.session``; a batch's Parquet files are ``sink.batch_files``.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from replicator.errors import LeaseError, SinkError
from replicator.plan import program
from replicator.plan.model import Plan, TablePlan
from replicator.plan.program import BatchKey, StagingQuery, Statement, TruncateAt
from replicator.plan.statements import bookkeeping, merging, names, tables
from replicator.sink.batch_files import (
    BatchPart,
    loadable,
    loaded_rows,
    scratch_directory,
    write_slices,
)
from replicator.sink.limits import check_value_sizes
from replicator.sink.protocol import ApplyResult, TableBatch, parquet_files, state_from_row
from replicator.sink.session import SinkSession

if TYPE_CHECKING:
    import pyarrow as pa


class SQLSink(SinkSession):
    """Subclasses set ``dialect`` and implement the session's hooks (``SinkSession``)."""

    # The landing root an external stage points at (``Dialect.external_stage``): change
    # files are named relative to it.
    stage_root: str | None = None
    # Called with a failpoint's name inside a batch (``apply.after_load``,
    # ``apply.before_commit``): the engine's ``failpoints.reached`` (sink/ does not import
    # engine/); None: no failpoints (tests of the sink alone).
    failpoint: Callable[[str], None] | None = None

    def __init__(self, pipeline_name: str, plan: Plan, connection: Any) -> None:
        super().__init__(connection)
        self.pipeline_name = pipeline_name
        self.plan = plan

    # -- the algorithm --------------------------------------------------------------------

    def prepare(self) -> None:
        """The setup program of every table: CREATE what is missing, ALTER what grew."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                for table in self.plan.tables:
                    existing: dict[str, set[str]] = {}
                    described: dict[str, dict[str, str | None]] = {}
                    key: list[str] | None = None
                    for statement in program.setup_program(table, self.dialect):
                        self._run(cursor, statement)
                        if statement.role == "key":
                            key = tables.existing_primary_key(
                                cursor.fetchall(),
                                [str(column[0]) for column in cursor.description or ()],
                                self.dialect)
                        if statement.role == "columns":
                            existing[statement.subject] = {
                                str(column[0]) for column in cursor.description or ()
                            }
                            described[statement.subject] = {
                                str(column[0]).lower(): self.described_type(column)
                                for column in cursor.description or ()}
                    for statement in program.column_changes(
                            table, self.dialect, existing, described.get("target"),
                            described.get("staging")):
                        self._run(cursor, statement)
                    for statement in program.key_changes(table, self.dialect, key):
                        self._run(cursor, statement)
                    for statement in program.setup_end(self.dialect):
                        self._run(cursor, statement)
            except self.driver_errors() as exc:
                self._rollback(cursor)
                raise self._failed(exc, "create the target tables") from None
            finally:
                cursor.close()

    def apply(
        self, table: TablePlan, batch_id: int, end_offset: dict[str, Any],
        staged: pa.Table | Iterable[pa.Table] | Sequence[str | os.PathLike[str]],
        *, query: StagingQuery | None = None, fresh: bool = False,
        truncates: Sequence[TruncateAt] = (),
        at_truncate: Callable[[TablePlan], None] | None = None,
    ) -> ApplyResult:
        """The batch program: skip an applied batch, else load, MERGE and record it in ONE
        transaction. ``staged``: an Arrow table, an iterable of Arrow slices (pulled only
        after the lookup), or a list of Parquet files already in the staging layout; with
        ``query``, a list of change files the warehouse stages by running it. ``fresh``: a
        snapshot batch of a copy that began with the target empty (INSERT, not MERGE).
        ``truncates``: the followed TRUNCATEs the batch holds, statements of its transaction
        (``program.truncate_records``); ``at_truncate(table)`` is called where they meet the
        table's other writes (``_run_tail``; the engine's failpoint).

        A transient failure at any statement (a lost connection, an expired session, a
        warehouse resuming) rolls back and runs the whole program again on a new session,
        with the same batch id, after ``retry_delays`` (so exactly-once holds: a COMMIT that
        went through before the failure is found by the lookup and skipped). The slices are
        written to Parquet once; every attempt loads those files. When the delays are used
        up the transient error goes to the engine, which restarts the stream (or the run)."""
        key = BatchKey(self.pipeline_name, table.target_table, batch_id, end_offset)
        given = parquet_files(staged)
        with self._one_at_a_time(), scratch_directory(given is None) as directory:
            part = BatchPart(TableBatch(table, staged, query, truncates), key, given, directory)
            return self._with_retries(batch_id,
                                      lambda: self._apply_once(part, fresh, at_truncate))

    def apply_atomic(self, batches: Sequence[TableBatch], batch_id: int,
                     end_offset: dict[str, Any], *,
                     between_tables: Callable[[], None] | None = None,
                     at_truncate: Callable[[TablePlan], None] | None = None
                     ) -> list[ApplyResult]:
        """``target.atomic``: one batch of several tables in ONE transaction
        (``program.atomic_program``): the tables whose state row for ``batch_id`` exists are
        left out (a batch a per-table run had half applied before the switch), the others
        are loaded, merged and recorded, and one COMMIT makes them visible together. Results
        in the order of ``batches``. Retries as ``apply``: the whole transaction again.
        ``between_tables``: called after a table's writes when another table's follow (the
        engine's failpoint: a crash there must leave the target without either);
        ``at_truncate``: as for ``apply``, for each table with a followed TRUNCATE."""
        with self._one_at_a_time(), contextlib.ExitStack() as stack:
            parts = []
            for batch in batches:
                given = parquet_files(batch.staged)
                directory = stack.enter_context(scratch_directory(given is None))
                parts.append(BatchPart(batch, BatchKey(self.pipeline_name, batch.table.target_table,
                                                   batch_id, end_offset), given, directory))
            return self._with_retries(batch_id,
                                     lambda: self._apply_atomic_once(parts, between_tables,
                                                                     at_truncate))

    def _apply_once(self, part: BatchPart, fresh: bool = False,
                    at_truncate: Callable[[TablePlan], None] | None = None) -> ApplyResult:
        table, key = part.batch.table, part.key
        cursor = self._cursor()
        try:
            for statement in program.batch_head(table, self.dialect, key):
                self._run(cursor, statement)
                if statement.role == "skip" and cursor.fetchone() is not None:
                    for skip in program.ON_SKIP:
                        self._run(cursor, skip)
                    return _SKIPPED
            self._load(cursor, part)
            staged_at = time.perf_counter()
            # ``program.batch_tail``, in its three parts: the crash tests' windows lie between.
            self._run_tail(cursor, program.load_commit(self.dialect))
            self._failpoint("apply.after_load")  # staging loaded (and committed), no MERGE
            self._run_tail(cursor, program.table_changes(
                table, self.dialect, key, part.dead_letters, fresh=fresh,
                truncates=part.batch.truncates), table, at_truncate)
            self._failpoint("apply.before_commit")  # MERGE and state row run, not committed
            self._run_tail(cursor, program.batch_end(table, self.dialect, key, self.generation))
            part.merge_seconds = time.perf_counter() - staged_at
        except self.driver_errors() as exc:
            self._rollback(cursor)
            raise self._failed(exc, f"apply batch {key.batch_id} to {table.target_table}") \
                from None
        except BaseException:
            # A slice failed to decode (source error, interrupt), or the load lost rows:
            # nothing of the batch stays.
            self._rollback(cursor)
            raise
        finally:
            with contextlib.suppress(Exception):  # a cursor of a lost session
                cursor.close()
        return part.result()

    def _apply_atomic_once(self, parts: list[BatchPart],
                           between_tables: Callable[[], None] | None,
                           at_truncate: Callable[[TablePlan], None] | None = None
                           ) -> list[ApplyResult]:
        """One attempt at ``apply_atomic``: the statements of ``program.atomic_program`` for
        the tables not applied yet."""
        dialect = self.dialect
        cursor = self._cursor()
        try:
            applied = []
            for statement in program.atomic_head([p.program_part() for p in parts], dialect):
                self._run(cursor, statement)
                if statement.role == "skip":
                    applied.append(cursor.fetchone() is not None)
            pending = [part for part, done in zip(parts, applied, strict=True) if not done]
            if not pending:
                for skip in program.ON_SKIP:
                    self._run(cursor, skip)
                return [_SKIPPED for _ in parts]
            for part in pending:
                for statement in program.staging_head(part.batch.table, dialect):
                    self._run(cursor, statement)
                self._load(cursor, part)
            # Merge seconds as ``apply`` counts them (its tail has the load's COMMIT, the
            # fence and the COMMIT): the first table's take the load's, the last's the end.
            started = time.perf_counter()
            self._run_tail(cursor, program.load_commit(dialect))
            self._failpoint("apply.after_load")  # as in _apply_once
            for number, part in enumerate(pending):
                if number:
                    if between_tables is not None:
                        between_tables()
                    started = time.perf_counter()
                self._run_tail(cursor, program.table_changes(
                    part.batch.table, dialect, part.key, part.dead_letters,
                    truncates=part.batch.truncates), part.batch.table, at_truncate)
                part.merge_seconds = time.perf_counter() - started
            self._failpoint("apply.before_commit")
            started = time.perf_counter()
            self._run_tail(cursor, program.batch_end(pending[0].batch.table, dialect,
                                                     pending[0].key, self.generation))
            pending[-1].merge_seconds += time.perf_counter() - started
        except self.driver_errors() as exc:
            self._rollback(cursor)
            names = ", ".join(p.batch.table.target_table for p in parts)
            raise self._failed(exc, f"apply batch {parts[0].key.batch_id} to {names} "
                               "(one transaction: target.atomic)") from None
        except BaseException:
            self._rollback(cursor)  # as in _apply_once: nothing of the batch stays
            raise
        finally:
            with contextlib.suppress(Exception):  # a cursor of a lost session
                cursor.close()
        return [part.result() if not done else _SKIPPED
                for part, done in zip(parts, applied, strict=True)]

    def _failpoint(self, name: str) -> None:
        if self.failpoint is not None:
            self.failpoint(name)

    def _load(self, cursor: Any, part: BatchPart) -> None:
        """Write the part's slices to Parquet (once: every attempt loads those files), then
        run its load statements; the rows loaded must be the rows written."""
        table, batch_id = part.batch.table, part.key.batch_id
        part.rows, part.stage_seconds, part.dead_letters = 0, 0.0, []
        if part.given is None:
            if not part.written:
                refused: list[tuple[str, str, str]] = []

                def check(piece: Any) -> Any:
                    kept, dead = check_value_sizes(table, self.dialect, piece)
                    refused.extend(dead)
                    return kept

                # Slices are produced (decoded) while the transaction is open: only
                # writing and loading them counts as staging time.
                part.written.append((*write_slices(part.batch.staged, part.directory,
                                                    check=check), refused))
            paths, expected, part.stage_seconds, part.dead_letters = part.written[0]
            files = loadable(paths, self.dialect)
        else:
            stage_root = self.stage_root if part.batch.query is not None else None
            files, expected = loadable(part.given, self.dialect, stage_root), None
        started = time.perf_counter()
        part.folder = f"{batch_id}-{uuid.uuid4().hex[:12]}"  # this attempt's own
        for statement in program.load_statements(table, self.dialect, files, part.folder,
                                                 part.batch.query):
            self._run(cursor, statement)
            if statement.role == "load":
                part.rows += loaded_rows(cursor)
        if expected is not None and part.rows != expected:
            raise SinkError(
                f"staging {table.target_table} loaded {part.rows} rows of {expected} "
                f"(batch {batch_id})",
                hint="report a bug: the load statement of `replicator plan` lost rows",
            )
        part.stage_seconds += time.perf_counter() - started

    def _run_tail(self, cursor: Any, statements: Sequence[Statement],
                  table: TablePlan | None = None,
                  at_truncate: Callable[[TablePlan], None] | None = None) -> None:
        """Run statements after the load; the lease's fence must update its one row.
        ``at_truncate(table)`` is called where the table's followed TRUNCATE (role
        ``truncate``) meets its other writes: a merged table's after its DELETE and before
        its MERGE, a changelog / scd2 table's after its changes and before the first record."""
        truncating = [n for n, s in enumerate(statements) if s.role == "truncate"]
        at = None
        if truncating and table is not None and at_truncate is not None:
            at = truncating[-1] + 1 if table.mode == "merge" else truncating[0]
        for number, statement in enumerate(statements):
            if number == at and table is not None and at_truncate is not None:
                at_truncate(table)
            self._run(cursor, statement)
            if statement.role == "fence" and _updated(cursor) != 1:
                raise LeaseError(
                    f"pipeline {self.pipeline_name}: another run took the lease "
                    f"(generation {self.generation} is no longer current); this batch "
                    "was rolled back",
                    hint="this run stops; the run holding the lease applies the batches "
                    "now (replicator status shows which one)")

    def has_rows(self, table: TablePlan) -> bool:
        """Whether the target holds any row (``program.target_has_rows``)."""
        statement = program.target_has_rows(table, self.dialect)
        return self._read(statement.sql, (), lambda cursor: cursor.fetchone() is not None,
                          f"read whether {table.target_table} holds rows")

    def existing_columns(self, table: TablePlan, *, log: bool = False) -> set[str]:
        """The target's (or its log table's) column names, lower case: schema-change
        statements run only where still needed, so a replayed batch can run them again."""
        name = (names.log_name(table, self.dialect) if log
                else names.target_name(table, self.dialect))
        return self._read(
            tables.read_columns(name), (),
            lambda cursor: {str(column[0]).lower() for column in cursor.description or ()},
            f"read the columns of {table.target_table}")

    def described_columns(self, table: TablePlan) -> dict[str, str | None]:
        """The target's columns, lower case, each with its type as ``described_type`` tells
        it (None where the driver does not); {} while the table does not exist."""
        return self._read(
            tables.read_columns(names.target_name(table, self.dialect)), (),
            lambda cursor: {str(column[0]).lower(): self.described_type(column)
                            for column in cursor.description or ()},
            f"read the column types of {table.target_table}", missing={})

    def execute(self, table: TablePlan, schema_statements: Sequence[Statement]) -> None:
        """Schema-change statements of a followed DDL (``plan --ddl`` shows them), each on
        its own: warehouse DDL commits by itself, and each is safe to run again."""
        if not schema_statements:
            return
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                for statement in schema_statements:
                    self._run(cursor, statement)
                for statement in program.setup_end(self.dialect):
                    self._run(cursor, statement)
            except self.driver_errors() as exc:
                self._rollback(cursor)
                raise self._failed(exc, f"follow a schema change of {table.target_table}") \
                    from None
            finally:
                cursor.close()

    # -- the lease (engine.state.lease): primitives; the decisions are the engine's -------------

    # The generation of the lease this run holds; None: no fencing (tests of the sink alone).
    generation: int | None = None
    # The lease's holder naming a session (engine.state.lease.Lease.fence): the lease names this
    # sink's session, so the next run can end what a kill left open in it.
    lease_holder: Callable[[str | None], str] | None = None

    def lease_statement(self, name: str, params: list[Any]) -> Any:
        """Run one lease statement (``statements.bookkeeping.lease_<name>``) in its own transaction:
        the row read, or the number of rows updated."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                return self._lease_statement(cursor, name, params)
            except self.driver_errors() as exc:
                self._rollback(cursor)
                if name == "insert":
                    return 0  # a concurrent first run inserted it (the key held)
                raise self._failed(exc, f"{name} the pipeline's lease") from None
            finally:
                cursor.close()

    def _lease_statement(self, cursor: Any, name: str, params: list[Any]) -> Any:
        render = getattr(bookkeeping, f"lease_{name}")
        if name == "read":
            cursor.execute(bookkeeping.create_lease_table(self.plan.tables[0], self.dialect))
        cursor.execute(render(self.plan.tables[0], self.dialect), params)
        result = cursor.fetchone() if name == "read" else _updated(cursor)
        if self.dialect.implicit_transactions:
            cursor.execute(program.COMMIT)
        return result

    def _claim_parameters(self) -> list[Any]:
        assert self.lease_holder is not None
        return [self.lease_holder(self.session_id()), self.pipeline_name, self.generation]

    def claim_lease(self) -> None:
        """Name this sink's session in the lease this run holds (no row: another run took it,
        which the next batch's fence reports)."""
        if self.generation is not None and self.lease_holder is not None:
            self.lease_statement("claim", self._claim_parameters())

    def abort_transactions_of(self, session: str) -> list[str]:
        """Abort the transactions still open in another session of this user (one a killed
        run left behind); their ids."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                return self.abort_in(cursor, session)
            except self.driver_errors() as exc:
                self._rollback(cursor)
                raise self._failed(exc, f"abort the transactions of session {session}") from None
            finally:
                cursor.close()

    def _reopened(self, cursor: Any, abandoned: str | None) -> None:
        """After a lost connection: the abandoned session may live on, its transaction open
        and holding the locks the batch about to be tried again needs; end it, and name the
        new session in the lease. Best effort: the retried batch reports what still fails."""
        with contextlib.suppress(*self.driver_errors()):
            if abandoned is not None:
                self.abort_in(cursor, abandoned)
            if self.generation is not None and self.lease_holder is not None:
                self._lease_statement(cursor, "claim", self._claim_parameters())

    def last_applied(self, table: TablePlan) -> dict[str, Any] | None:
        recent = self.recent_applied(table, 1)
        return recent[0] if recent else None

    def recent_applied(self, table: TablePlan, count: int) -> list[dict[str, Any]]:
        """The table's newest ``count`` state rows, newest first (the checkpoint-less resume
        needs the batch before the newest: engine.start)."""
        rows = self._read(bookkeeping.state_latest(table, self.dialect, count),
                          (self.pipeline_name, table.target_table), lambda c: c.fetchall(),
                          "read the state table", missing=[])  # none yet: nothing applied
        return [state for state in map(state_from_row, rows) if state is not None]

    def dead_letters(self, table: TablePlan) -> int:
        """Rows of ``table`` set aside in the dead-letter table (0 when it has none)."""
        if table.on_error != "dead_letter":
            return 0
        row = self._read(bookkeeping.dead_letter_count(table, self.dialect),
                         (self.pipeline_name, table.target_table), lambda c: c.fetchone(),
                         "read the dead-letter table", missing=None)  # none yet: none set aside
        return int(row[0]) if row else 0

    def delete_not_rewritten(self, table: TablePlan, marker_batch_id: int) -> int:
        """The end of a re-copy (``engine.recopy``): delete the rows no batch wrote since the
        copy's marker batch; how many. One statement: run again after a crash, it finds only
        rows that were stale already."""
        sql = merging.delete_not_rewritten(table, self.dialect)
        params = (self.pipeline_name, table.target_table, marker_batch_id)
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                self._run(cursor, Statement("delete the rows no batch wrote since the "
                                            "re-copy began", sql, params))
                deleted = _updated(cursor)
                for statement in program.setup_end(self.dialect):
                    self._run(cursor, statement)
                return deleted
            except self.driver_errors() as exc:
                self._rollback(cursor)
                raise self._failed(exc, f"finish the re-copy of {table.target_table}") from None
            finally:
                cursor.close()


_SKIPPED = ApplyResult(skipped=True, rows=0, seconds_stage=0.0, seconds_merge=0.0)


def _updated(cursor: Any) -> int:
    """Rows an UPDATE/INSERT changed: DuckDB and Snowflake return the count as a result row."""
    row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
