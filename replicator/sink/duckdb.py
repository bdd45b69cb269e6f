"""The embedded local target: one DuckDB file. The only module that imports duckdb.

What DuckDB supplies to the one SQL sink (``sink.sql.SQLSink``): the connection, and how its
errors sort. Each batch runs on a cursor of its own (a connection of its own in DuckDB, so
tables of one batch can be applied from several threads), which is why its staging is a TEMP
table the batch program creates. The batch's Parquet files are read in place
(``read_parquet``). DuckDB 2.0 quirks (DESIGN.md): TEMP tables cannot be qualified and shadow
permanent tables of the same name (staging tables carry a prefix), one ALTER action per
statement, one writer process per file.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError, TransientSinkError
from replicator.plan.dialects import DUCKDB
from replicator.plan.model import Plan
from replicator.sink.sql import SQLSink

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline


def _sink_error(exc: BaseException, doing: str) -> SinkError:
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


# The working memory a batch's apply gets on top of the target's own size: with it, every
# process of a run applying a 1M-row transaction stays under 1.5 GiB together (issue 30's
# bound; docs/decisions/duckdb-memory-limit.md).
APPLY_MEMORY_BYTES = 384_000_000
# The memory_limit each file was first opened with in this process, by its real path: DuckDB
# shares one database instance per file in a process and refuses a second connection whose
# configuration differs ("Can't open a connection to same database file with a different
# configuration"), and the file's size, which the limit is computed from, grows meanwhile.
_FIRST_LIMITS: dict[str, dict[str, Any]] = {}


# DuckDB checkpoints the target when its WAL passes this size (its own default: 16 MiB). A
# checkpoint rewrites every row group a MERGE touched since the last one, and the bench's
# updates touch most of them: at 16 MiB a 300k-change run checkpointed ~every other batch,
# a fifth of its apply's CPU (docs/decisions/duckdb-apply-last-change.md). The WAL is on
# disk and the data behind it stays within memory_limit; DuckDB checkpoints at close anyway.
CHECKPOINT_THRESHOLD = "256MB"


def default_settings(path: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The connection settings replicator gives where ``target.duckdb.settings`` does not:
    ``memory_limit`` = the database file's size when the run opens it (what the target's
    MERGEs read, DuckDB keeps cached) + ``APPLY_MEMORY_BYTES``, at most DuckDB's own default
    (80% of the machine's memory). Without it DuckDB caches up to that 80%, and a big
    transaction's apply grows the driver by what it stages (1M rows: +650 MiB for scd2).
    And ``checkpoint_threshold`` = ``CHECKPOINT_THRESHOLD``. An in-memory target (no file
    to spill beside, no WAL) keeps DuckDB's defaults."""
    if path == ":memory:":
        return {}
    given = {name.lower() for name in settings}
    defaults: dict[str, Any] = {}
    if not given & {"checkpoint_threshold", "wal_autocheckpoint"}:  # one setting, two names
        defaults["checkpoint_threshold"] = CHECKPOINT_THRESHOLD
    if "memory_limit" in given:
        return defaults  # the user's
    key = os.path.realpath(path)
    if key not in _FIRST_LIMITS:
        _FIRST_LIMITS[key] = _limit_for(path)
    return {**defaults, **_FIRST_LIMITS[key]}


def _limit_for(path: str) -> dict[str, Any]:
    try:
        cached = sum(os.stat(name).st_size for name in (path, path + ".wal")
                     if os.path.exists(name))
        machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        return {}
    limit = cached + APPLY_MEMORY_BYTES
    if limit >= 0.8 * machine:
        return {}
    return {"memory_limit": f"{-(-limit // 1_000_000)}MB"}


class DuckDBSink(SQLSink):
    dialect = DUCKDB

    def __init__(self, pipeline: Pipeline, plan: Plan, *, connection: Any = None) -> None:
        if connection is None:
            import duckdb

            path = getattr(pipeline.target.warehouse, "path", ":memory:")
            settings = dict(getattr(pipeline.target.warehouse, "settings", ()))
            try:
                connection = duckdb.connect(path, config={**default_settings(path, settings),
                                                          **settings})
            except duckdb.Error as exc:
                if settings and not isinstance(exc, duckdb.IOException):
                    raise SinkError(
                        "DuckDB refused the connection settings {"
                        + ", ".join(f"{name}: {value}" for name, value in settings.items())
                        + f"}}: {exc}",
                        hint="check target.duckdb.settings (DuckDB's configuration option "
                        "names and values: SELECT * FROM duckdb_settings())") from None
                raise _sink_error(exc, f"open {path}") from exc
        super().__init__(pipeline.name, plan, connection)

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        import duckdb

        return (duckdb.Error,)

    def sink_error(self, exc: BaseException, doing: str) -> SinkError:
        return _sink_error(exc, doing)

    @staticmethod
    def described_type(column: Any) -> str | None:
        """A cursor description row's type as DuckDB names it (``BIGINT``, ``DECIMAL(16,2)``)."""
        return str(column[1]).upper() if column[1] is not None else None

    def missing_table(self, exc: BaseException) -> bool:
        import duckdb

        return isinstance(exc, duckdb.CatalogException)
