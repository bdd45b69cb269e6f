"""The embedded local target: one DuckDB file. The only module that imports duckdb.

Per batch, on its own cursor (a connection of its own, so tables of one batch can be applied
from several threads): BEGIN; skip if the batch is in the state table; Arrow -> a TEMP staging
table (slice by slice for a big batch); MERGE; state row; COMMIT. DuckDB 2.0 quirks (DESIGN.md): TEMP tables cannot be
qualified and shadow permanent tables of the same name (staging tables carry a prefix), one
ALTER action per statement, one writer process per file.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError, TransientSinkError
from replicator.plan import statements
from replicator.plan.dialects import DUCKDB
from replicator.plan.model import Plan, TablePlan
from replicator.sink import ApplyResult, slices_of, state_from_row

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.model.pipeline import Pipeline

_ARROW_VIEW = "_replicator_arrow_batch"


def _sink_error(exc: Exception, doing: str) -> SinkError:
    """Sort a duckdb error into transient (retry may help) or terminal."""
    import duckdb

    message = f"DuckDB failed to {doing}: {exc}"
    if isinstance(exc, duckdb.TransactionException):  # a write-write conflict: retry
        return TransientSinkError(message, hint="retried automatically")
    if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
        return SinkError(
            message,
            hint="another process has the DuckDB file open for writing; stop it "
            "(one writer process per DuckDB file)",
        )
    if isinstance(exc, duckdb.IOException):
        return TransientSinkError(message, hint="check the disk holding the DuckDB file")
    return SinkError(message, hint="run `replicator plan` to see the SQL; report a bug if it is wrong")


class DuckDBSink:
    dialect = DUCKDB

    def __init__(self, pipeline: Pipeline, plan: Plan, *, connection: Any = None) -> None:
        import duckdb

        warehouse = pipeline.target.warehouse
        self.pipeline_name = pipeline.name
        self.plan = plan
        if connection is not None:
            self._connection = connection
        else:
            try:
                self._connection = duckdb.connect(getattr(warehouse, "path", ":memory:"))
            except duckdb.Error as exc:
                raise _sink_error(exc, f"open {getattr(warehouse, 'path', '')}") from exc

    def prepare(self) -> None:
        import duckdb

        cursor = self._connection.cursor()
        try:
            for table in self.plan.tables:
                for sql in filter(
                    None,
                    [
                        statements.create_schema(table, self.dialect),
                        statements.create_target_table(table, self.dialect),
                        table.log_table and statements.create_log_table(table, self.dialect),
                        statements.create_state_table(table, self.dialect),
                    ],
                ):
                    cursor.execute(sql)
                for sql in statements.add_columns(
                    table, self._missing_columns(cursor, table), self.dialect
                ):
                    cursor.execute(sql)
                if table.log_table:
                    missing = self._missing_columns(cursor, table, log=True)
                    for sql in statements.add_columns(table, missing, self.dialect, log=True):
                        cursor.execute(sql)
        except duckdb.Error as exc:
            raise _sink_error(exc, "create the target tables") from exc
        finally:
            cursor.close()

    def _missing_columns(self, cursor: Any, table: TablePlan, *, log: bool = False):
        rows = cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE lower(table_schema) = lower(?) AND lower(table_name) = lower(?)",
            [table.target_namespace[-1], table.log_parts[-1] if log else table.target_table],
        ).fetchall()
        existing = {name.lower() for (name,) in rows}  # DuckDB names are case-insensitive
        columns = table.log_columns if log else table.columns
        return [c for c in columns if c.target_column.lower() not in existing]

    def apply(
        self, table: TablePlan, batch_id: int, end_offset: dict[str, Any],
        staged: pa.Table | Iterable[pa.Table],
    ) -> ApplyResult:
        import duckdb

        cursor = self._connection.cursor()
        key = [self.pipeline_name, table.target_table, batch_id]
        rows = 0
        stage_seconds = 0.0
        try:
            cursor.execute("BEGIN TRANSACTION")
            if cursor.execute(statements.state_lookup(table, self.dialect), key).fetchone():
                cursor.execute("ROLLBACK")
                return ApplyResult(skipped=True, rows=0, seconds_stage=0.0, seconds_merge=0.0)
            cursor.execute(statements.create_staging_table(table, self.dialect))
            cursor.execute(statements.clear_staging(table, self.dialect))
            insert = (f"INSERT INTO {statements.staging_name(table, self.dialect)} "
                      f"SELECT * FROM {_ARROW_VIEW}")
            # Slices are produced (decoded) while the transaction is open: only the time of
            # loading them counts as staging here.
            for piece in slices_of(staged):
                started = time.perf_counter()
                cursor.register(_ARROW_VIEW, piece)
                cursor.execute(insert)
                cursor.unregister(_ARROW_VIEW)
                rows += piece.num_rows
                stage_seconds += time.perf_counter() - started
            staged_at = time.perf_counter()
            for _purpose, sql in statements.batch_statements(table, self.dialect):
                cursor.execute(sql)
            cursor.execute(
                statements.state_insert(table, self.dialect), [*key, json.dumps(end_offset)]
            )
            cursor.execute("COMMIT")
            merged_at = time.perf_counter()
        except duckdb.Error as exc:
            with contextlib.suppress(duckdb.Error):  # the failed transaction may be gone
                cursor.execute("ROLLBACK")
            raise _sink_error(exc, f"apply batch {batch_id} to {table.target_table}") from exc
        except BaseException:
            # A slice failed to decode (source error, interrupt): nothing of the batch stays.
            with contextlib.suppress(duckdb.Error):
                cursor.execute("ROLLBACK")
            raise
        finally:
            cursor.close()
        return ApplyResult(
            skipped=False,
            rows=rows,
            seconds_stage=stage_seconds,
            seconds_merge=merged_at - staged_at,
        )

    def last_applied(self, table: TablePlan) -> dict[str, Any] | None:
        import duckdb

        cursor = self._connection.cursor()
        try:
            row = cursor.execute(
                statements.state_latest(table, self.dialect),
                [self.pipeline_name, table.target_table],
            ).fetchone()
        except duckdb.CatalogException:
            return None  # no state table yet: nothing applied
        except duckdb.Error as exc:
            raise _sink_error(exc, "read the state table") from exc
        finally:
            cursor.close()
        return state_from_row(row)

    @property
    def connection(self) -> Any:
        """The DuckDB connection (tests and `verify` read the target through it)."""
        return self._connection

    def close(self) -> None:
        self._connection.close()
