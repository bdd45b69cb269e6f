"""The one SQL sink algorithm: run the programs ``replicator plan`` prints (``plan.program``).

``SQLSink`` executes the setup program (CREATE, read columns, ALTER) and, per batch, the batch
program: the exactly-once lookup first (a row: ROLLBACK, nothing else runs and no slice is
pulled), then the staged rows become Parquet files (or the caller's files are taken as they
are), the load statements put them into staging, and the MERGE / changelog / scd2 statements
and the state row commit together; ``apply_atomic`` does it for several tables of one batch in
ONE transaction (``target.atomic``). Every statement it runs comes from ``plan.program``; the
warehouses differ only in what ``DuckDBSink`` and ``SnowflakeSink`` supply: the connection,
the driver's error classes and how they are sorted, whether one session may run one
transaction at a time, and which files the load can read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from replicator.errors import LeaseError, SinkError
from replicator.plan import program
from replicator.plan.dialects import Dialect
from replicator.plan.model import Plan, TablePlan
from replicator.plan.program import BatchKey, StagingQuery, Statement
from replicator.plan.statements import bookkeeping, merging, names, tables
from replicator.sink import (
    ApplyResult,
    TableBatch,
    parquet_files,
    slices_of,
    state_from_row,
)
from replicator.sink.limits import check_value_sizes

if TYPE_CHECKING:
    import pyarrow as pa


class SQLSink:
    """Subclasses set ``dialect`` and implement the hooks at the end of the class."""

    dialect: Dialect
    # One transaction at a time per session (a Snowflake connection is one session); DuckDB
    # gives every batch a connection of its own (``cursor()``), so tables apply in parallel.
    one_transaction_at_a_time: bool = False

    def __init__(self, pipeline_name: str, plan: Plan, connection: Any) -> None:
        self.pipeline_name = pipeline_name
        self.plan = plan
        self._connection = connection
        self._session = threading.Lock() if self.one_transaction_at_a_time else None
        # A transient error may have taken the session with it: the next call opens a new
        # one (``reopen``) before it runs anything.
        self._stale = False
        # Seconds to wait before each new attempt of a batch after a transient error
        # (REPLICATOR_SINK_RETRY_DELAYS="1,2,4": tests and impatient operators), and who
        # hears about it (the run's notices).
        self.retry_delays: tuple[float, ...] = retry_delays()
        self.sleep: Callable[[float], None] = time.sleep
        self.on_retry: Callable[[str], None] | None = None

    # -- the algorithm --------------------------------------------------------------------

    def prepare(self) -> None:
        """The setup program of every table: CREATE what is missing, ALTER what grew."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                for table in self.plan.tables:
                    existing: dict[str, set[str]] = {}
                    described: dict[str, str | None] = {}
                    key: list[str] | None = None
                    for statement in program.setup_program(table, self.dialect):
                        self._run(cursor, statement)
                        if statement.role == "key":
                            row = cursor.fetchone()
                            key = [str(name) for name in row[0]] if row else None
                        if statement.role == "columns":
                            existing[statement.subject] = {
                                str(column[0]) for column in cursor.description or ()
                            }
                            if statement.subject == "target":
                                described = {str(column[0]).lower(): self.described_type(column)
                                             for column in cursor.description or ()}
                    for statement in program.column_changes(table, self.dialect, existing,
                                                            described):
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
    ) -> ApplyResult:
        """The batch program: skip an applied batch, else load, MERGE and record it in ONE
        transaction. ``staged``: an Arrow table, an iterable of Arrow slices (pulled only
        after the lookup), or a list of Parquet files already in the staging layout; with
        ``query``, a list of change files the warehouse stages by running it. ``fresh``: a
        snapshot batch of a copy that began with the target empty (INSERT, not MERGE).

        A transient failure at any statement (a lost connection, an expired session, a
        warehouse resuming) rolls back and runs the whole program again on a new session,
        with the same batch id, after ``retry_delays`` (so exactly-once holds: a COMMIT that
        went through before the failure is found by the lookup and skipped). The slices are
        written to Parquet once; every attempt loads those files. When the delays are used
        up the transient error goes to the engine, which restarts the stream (or the run)."""
        key = BatchKey(self.pipeline_name, table.target_table, batch_id, end_offset)
        given = parquet_files(staged)
        with self._one_at_a_time(), _scratch_directory(given is None) as directory:
            part = _Part(TableBatch(table, staged, query), key, given, directory)
            return self._with_retries(batch_id, lambda: self._apply_once(part, fresh))

    def apply_atomic(self, batches: Sequence[TableBatch], batch_id: int,
                     end_offset: dict[str, Any], *,
                     between_tables: Callable[[], None] | None = None) -> list[ApplyResult]:
        """``target.atomic``: one batch of several tables in ONE transaction
        (``program.atomic_program``): the tables whose state row for ``batch_id`` exists are
        left out (a batch a per-table run had half applied before the switch), the others
        are loaded, merged and recorded, and one COMMIT makes them visible together. Results
        in the order of ``batches``. Retries as ``apply``: the whole transaction again.
        ``between_tables``: called after a table's writes when another table's follow (the
        engine's failpoint: a crash there must leave the target without either)."""
        with self._one_at_a_time(), contextlib.ExitStack() as stack:
            parts = []
            for batch in batches:
                given = parquet_files(batch.staged)
                directory = stack.enter_context(_scratch_directory(given is None))
                parts.append(_Part(batch, BatchKey(self.pipeline_name, batch.table.target_table,
                                                   batch_id, end_offset), given, directory))
            return self._with_retries(batch_id,
                                     lambda: self._apply_atomic_once(parts, between_tables))

    def _with_retries(self, batch_id: int, attempt: Callable[[], Any]) -> Any:
        for number in range(len(self.retry_delays) + 1):
            try:
                return attempt()
            except SinkError as error:
                if not error.transient or number == len(self.retry_delays):
                    raise
                delay = self.retry_delays[number]
                if self.on_retry is not None:
                    self.on_retry(f"transient error (attempt {number + 1}): "
                                  f"{error.message}; batch {batch_id} again in {delay:g} s")
                self.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _apply_once(self, part: _Part, fresh: bool = False) -> ApplyResult:
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
            self._run_tail(cursor, program.batch_tail(
                table, self.dialect, key, part.dead_letters, fresh=fresh,
                generation=self.generation))
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

    def _apply_atomic_once(self, parts: list[_Part],
                           between_tables: Callable[[], None] | None) -> list[ApplyResult]:
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
            for number, part in enumerate(pending):
                if number:
                    if between_tables is not None:
                        between_tables()
                    started = time.perf_counter()
                self._run_tail(cursor, program.table_changes(
                    part.batch.table, dialect, part.key, part.dead_letters))
                part.merge_seconds = time.perf_counter() - started
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

    def _load(self, cursor: Any, part: _Part) -> None:
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
                part.written.append((*_write_slices(part.batch.staged, part.directory,
                                                    check=check), refused))
            paths, expected, part.stage_seconds, part.dead_letters = part.written[0]
            files = self._loadable(paths)
        else:
            files, expected = self._loadable(part.given), None
        started = time.perf_counter()
        part.folder = f"{batch_id}-{uuid.uuid4().hex[:12]}"  # this attempt's own
        for statement in program.load_statements(table, self.dialect, files, part.folder,
                                                 part.batch.query):
            self._run(cursor, statement)
            if statement.role == "load":
                part.rows += _loaded_rows(cursor)
        if expected is not None and part.rows != expected:
            raise SinkError(
                f"staging {table.target_table} loaded {part.rows} rows of {expected} "
                f"(batch {batch_id})",
                hint="report a bug: the load statement of `replicator plan` lost rows",
            )
        part.stage_seconds += time.perf_counter() - started

    def _run_tail(self, cursor: Any, statements: Sequence[Statement]) -> None:
        """Run statements after the load; the lease's fence must update its one row."""
        for statement in statements:
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

    # -- the lease (engine.lease): primitives; the decisions are the engine's -------------

    # The generation of the lease this run holds; None: no fencing (tests of the sink alone).
    generation: int | None = None

    def lease_statement(self, name: str, params: list[Any]) -> Any:
        """Run one lease statement (``statements.bookkeeping.lease_<name>``) in its own transaction:
        the row read, or the number of rows updated."""
        render = getattr(bookkeeping, f"lease_{name}")
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                if name == "read":
                    cursor.execute(bookkeeping.create_lease_table(self.plan.tables[0],
                                                                  self.dialect))
                cursor.execute(render(self.plan.tables[0], self.dialect), params)
                result = cursor.fetchone() if name == "read" else _updated(cursor)
                if self.dialect.implicit_transactions:
                    cursor.execute(program.COMMIT)
                return result
            except self.driver_errors() as exc:
                self._rollback(cursor)
                if name == "insert":
                    return 0  # a concurrent first run inserted it (the key held)
                raise self._failed(exc, f"{name} the pipeline's lease") from None
            finally:
                cursor.close()

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

    def _read(self, sql: str, params: Sequence[Any], result: Callable[[Any], Any], doing: str,
              **missing: Any) -> Any:
        """Run one read on a cursor of its own and end its transaction: what ``result`` takes
        from the cursor; ``missing=V``: V when the table it reads does not exist yet."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                self._run(cursor, Statement("read", sql, tuple(params)))
                value = result(cursor)
                if self.dialect.implicit_transactions:  # end the read's transaction
                    cursor.execute(program.ROLLBACK)
                return value
            except self.driver_errors() as exc:
                if missing and self.missing_table(exc):
                    return missing["missing"]
                raise self._failed(exc, doing) from None
            finally:
                cursor.close()

    @staticmethod
    def described_type(column: Any) -> str | None:
        """A cursor description row's column type as ``Dialect.type_name`` writes it, where
        the driver tells it (None: unknown); the setup widens columns by it."""
        return None

    @property
    def connection(self) -> Any:
        """The driver connection (tests and ``verify`` read the target through it)."""
        return self._connection

    def close(self) -> None:
        self._connection.close()

    # -- helpers --------------------------------------------------------------------------

    def _cursor(self) -> Any:
        if self._stale:
            replacement = self.reopen()
            if replacement is not None:
                with contextlib.suppress(Exception):  # the old session is most likely gone
                    self._connection.close()
                self._connection = replacement
            self._stale = False
        return self._connection.cursor()

    def _failed(self, exc: BaseException, doing: str) -> SinkError:
        error = self.sink_error(exc, doing)
        self._stale = self._stale or error.transient
        return error

    @staticmethod
    def _run(cursor: Any, statement: Statement) -> None:
        if statement.params:
            cursor.execute(statement.sql, list(statement.params))
        else:
            cursor.execute(statement.sql)

    def _rollback(self, cursor: Any) -> None:
        with contextlib.suppress(Exception):  # the failed transaction (or session) may be gone
            cursor.execute(program.ROLLBACK)

    def _one_at_a_time(self) -> contextlib.AbstractContextManager[Any]:
        return self._session if self._session is not None else contextlib.nullcontext()

    def _loadable(self, paths: list[str]) -> list[str]:
        """The caller's Parquet files as the load statements take them. Through a stage (PUT)
        a file must be local; its name must be unique in the batch (one stage folder)."""
        if not self.dialect.load_through_stage:
            return paths
        local = []
        for path in paths:
            if "://" in path and not path.startswith("file://"):
                raise SinkError(
                    f"cannot PUT {path} to a Snowflake stage: not a local file",
                    hint="keep engine.landing on a local or mounted path for a Snowflake target",
                )
            path = os.path.abspath(path.removeprefix("file://"))
            if not os.path.isfile(path):
                raise SinkError(f"staged Parquet file {path} does not exist",
                                hint="the landing zone lost a file of this batch; re-run")
            local.append(path)
        return _checked_for_put(local)

    # -- hooks ------------------------------------------------------------------------------

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def sink_error(self, exc: BaseException, doing: str) -> SinkError:
        raise NotImplementedError

    def missing_table(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def reopen(self) -> Any:
        """A new connection after a transient error, or None to keep the one there is."""
        return None


_SKIPPED = ApplyResult(skipped=True, rows=0, seconds_stage=0.0, seconds_merge=0.0)


@dataclasses.dataclass
class _Part:
    """One table of a batch being applied, across attempts: what was written once (its
    slices as Parquet files) and what the last attempt loaded."""

    batch: TableBatch
    key: BatchKey
    given: list[str] | None  # the caller's Parquet (or change) files
    directory: str | None  # where the slices are written (given is None)
    written: list[Any] = dataclasses.field(default_factory=list)  # (paths, rows, s, dead)
    rows: int = 0
    stage_seconds: float = 0.0
    merge_seconds: float = 0.0
    folder: str = ""
    dead_letters: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    def program_part(self) -> program.AtomicPart:
        return program.AtomicPart(self.batch.table, self.key)

    def result(self) -> ApplyResult:
        return ApplyResult(skipped=False, rows=self.rows, seconds_stage=self.stage_seconds,
                           seconds_merge=self.merge_seconds)


# Up to ~1 min of waiting per batch: a resuming warehouse, a network blip, an expired
# session. Longer outages go to the engine's own restart-with-backoff.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


def retry_delays(environ: Any = None) -> tuple[float, ...]:
    """``RETRY_DELAYS_S``, or the seconds REPLICATOR_SINK_RETRY_DELAYS lists ("" : no retry
    inside the sink)."""
    text = (os.environ if environ is None else environ).get("REPLICATOR_SINK_RETRY_DELAYS")
    if text is None:
        return RETRY_DELAYS_S
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise SinkError(f"REPLICATOR_SINK_RETRY_DELAYS={text!r} is not a list of seconds",
                        hint='write seconds separated by commas, e.g. "1,2,4"') from None


def _checked_for_put(paths: list[str]) -> list[str]:
    names = [os.path.basename(p) for p in paths]
    if len(set(names)) != len(names):
        raise SinkError("two Parquet files of one batch have the same name",
                        hint="name landing-zone files by table and partition (a batch's files "
                        "share one stage folder)")
    for path in paths:
        if "'" in path or "\\" in path:
            raise SinkError(f"cannot PUT {path!r}: a quote or backslash in the path",
                            hint="use a landing (or TMPDIR) path without quotes or backslashes")
    return paths


@contextlib.contextmanager
def _scratch_directory(needed: bool) -> Iterator[str | None]:
    """Where a batch's Arrow slices become Parquet files (removed with the batch)."""
    if not needed:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="replicator-staging-") as directory:
        yield directory


def _write_slices(
    staged: Any, directory: str | None, *, check: Callable[[Any], None] | None = None,
) -> tuple[list[str], int, float]:
    """Each non-empty Arrow slice as one Parquet file: (paths, rows, seconds writing).
    ``check`` sees every slice first: it returns the rows to write (or raises)."""
    import pyarrow.parquet as pq

    assert directory is not None
    files, rows, seconds = [], 0, 0.0
    for piece in slices_of(staged):
        if not piece.num_rows:
            continue
        if check is not None:
            piece = check(piece)
            if not piece.num_rows:
                continue
        started = time.perf_counter()
        path = os.path.join(directory, f"slice-{len(files):05d}.parquet")
        pq.write_table(piece, path)
        seconds += time.perf_counter() - started
        files.append(path)
        rows += piece.num_rows
    return files, rows, seconds


def _loaded_rows(cursor: Any) -> int:
    """Rows a load statement put into staging: COPY reports ``rows_loaded`` per file,
    INSERT one count."""
    result = cursor.fetchall()
    names = [str(d[0]).lower() for d in cursor.description or ()]
    if "rows_loaded" in names:
        index = names.index("rows_loaded")
        return sum(int(row[index] or 0) for row in result)
    return int(result[0][0]) if result else 0


def _updated(cursor: Any) -> int:
    """Rows an UPDATE/INSERT changed: DuckDB and Snowflake return the count as a result row."""
    row = cursor.fetchone()
    return int(row[0]) if row and row[0] is not None else 0
