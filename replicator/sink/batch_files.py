"""A batch's Parquet files on their way into staging (``sink.sql.SQLSink._load``).

The staged Arrow slices are written once to a scratch directory (``write_slices``), and every
attempt of the batch loads those files; the caller's own files (the landing zone's) are taken
as they are, checked for a PUT where the load goes through a stage (``loadable``). ``BatchPart``
is one table of a batch across attempts; ``loaded_rows`` counts what a load statement put in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from replicator.errors import SinkError
from replicator.plan import program
from replicator.plan.dialects import Dialect
from replicator.plan.program import BatchKey
from replicator.plan.statements.stage_copy import stage_relative
from replicator.sink.protocol import ApplyResult, TableBatch, slices_of


@dataclasses.dataclass
class BatchPart:
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
        return program.AtomicPart(self.batch.table, self.key, truncates=self.batch.truncates)

    def result(self) -> ApplyResult:
        return ApplyResult(skipped=False, rows=self.rows, seconds_stage=self.stage_seconds,
                           seconds_merge=self.merge_seconds)


@contextlib.contextmanager
def scratch_directory(needed: bool) -> Iterator[str | None]:
    """Where a batch's Arrow slices become Parquet files (removed with the batch)."""
    if not needed:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="replicator-staging-") as directory:
        yield directory


def write_slices(
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


def loadable(paths: list[str], dialect: Dialect, stage_root: str | None = None) -> list[str]:
    """The caller's Parquet files as the load statements take them. Change files COPYed
    from an external stage (``stage_root``: the landing root it points at) by their names
    relative to it; through the table stage (PUT) a file must be local, its name unique in
    the batch (one stage folder)."""
    if dialect.external_stage and stage_root:
        try:
            return [stage_relative(path, stage_root) for path in paths]
        except ValueError as exc:
            raise SinkError(f"cannot COPY from @{dialect.external_stage}: {exc}",
                            hint="target.snowflake.stage must point at engine.landing's "
                            "location (docs/snowflake.md)") from None
    if not dialect.load_through_stage:
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


def loaded_rows(cursor: Any) -> int:
    """Rows a load statement put into staging: COPY reports ``rows_loaded`` per file,
    INSERT one count."""
    result = cursor.fetchall()
    names = [str(d[0]).lower() for d in cursor.description or ()]
    if "rows_loaded" in names:
        index = names.index("rows_loaded")
        return sum(int(row[index] or 0) for row in result)
    return int(result[0][0]) if result else 0
