"""What passes between the applier and a sink: the ``Sink`` protocol, a table's batch
(``TableBatch``), its ``ApplyResult``, and the helpers every sink shares to read a staged batch
(``slices_of``, ``parquet_files``) and a state table row (``state_from_row``).

Its own module, below ``sink/__init__.py`` (``open_sink``), so that ``sink.sql`` and
``sink.batch_files`` import it without importing the package that imports them back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.plan.model import TablePlan
    from replicator.plan.program import StagingQuery, TruncateAt


@dataclass(frozen=True)
class ApplyResult:
    skipped: bool  # the batch id was already in the state table: nothing was written
    rows: int  # staged rows (changes after compaction)
    seconds_stage: float
    seconds_merge: float


@dataclass(frozen=True)
class TableBatch:
    """One table's part of a batch, as ``Sink.apply`` takes it (``apply_atomic``: many)."""

    table: TablePlan
    staged: Any  # an Arrow table, an iterable of Arrow slices, or Parquet file paths
    query: StagingQuery | None = None
    # followed TRUNCATEs of the table in the batch (``program.truncate_records``)
    truncates: Sequence[TruncateAt] = ()


def slices_of(staged: pa.Table | Iterable[pa.Table]) -> Iterator[pa.Table]:
    """The slices of a staged batch: one Arrow table is a single slice."""
    if hasattr(staged, "num_rows"):
        yield staged  # type: ignore[misc]
    else:
        yield from staged  # type: ignore[misc]


def parquet_files(staged: Any) -> list[str] | None:
    """The paths when ``staged`` is a list (or tuple) of Parquet file paths, else None.

    Only a list or tuple is looked into: an iterable of slices may be a generator whose first
    slice must not be pulled before the sink's replay check.
    """
    if not isinstance(staged, (list, tuple)):
        return None
    if not all(isinstance(item, (str, os.PathLike)) for item in staged):
        return None
    return [os.fspath(item) for item in staged]


class Sink(Protocol):
    # Told each time a batch is tried again after a transient error (the run's notices).
    on_retry: Callable[[str], None] | None

    def prepare(self) -> None:
        """CREATE target and state tables if missing; ALTER TABLE for added columns."""

    def apply(
        self, table: TablePlan, batch_id: int, end_offset: dict[str, Any],
        staged: pa.Table | Iterable[pa.Table] | Sequence[str | os.PathLike[str]],
        *, query: StagingQuery | None = None, fresh: bool = False,
        truncates: Sequence[TruncateAt] = (),
        at_truncate: Callable[[TablePlan], None] | None = None,
    ) -> ApplyResult:
        """Stage (every slice, or the given Parquet files), MERGE and record the batch in ONE
        transaction; skip a batch already applied without pulling a slice. With ``query``
        the files are change files the warehouse stages itself (``program.StagingQuery``);
        ``fresh``: a copy into a target that was empty inserts (``program.fresh_copy``);
        ``truncates``: followed TRUNCATEs, statements of that transaction
        (``program.truncate_records``), ``at_truncate(table)`` called between them and the
        table's other writes."""

    def apply_atomic(self, batches: Sequence[TableBatch], batch_id: int,
                     end_offset: dict[str, Any], *,
                     between_tables: Callable[[], None] | None = None,
                     at_truncate: Callable[[TablePlan], None] | None = None
                     ) -> list[ApplyResult]:
        """``target.atomic``: every table of one batch in ONE transaction; a table whose
        batch is recorded already is left out. One result per table, in order."""

    def has_rows(self, table: TablePlan) -> bool:
        """Whether the target table holds any row."""

    def last_applied(self, table: TablePlan) -> dict[str, Any] | None:
        """{"batch_id", "end_offset", "applied_at"} of the table's newest state row."""

    def dead_letters(self, table: TablePlan) -> int:
        """Rows of the table set aside in the dead-letter table (on_error: dead_letter)."""

    def delete_not_rewritten(self, table: TablePlan, marker_batch_id: int) -> int:
        """Delete the rows no batch wrote since the marker batch (a re-copy's end)."""

    def recent_applied(self, table: TablePlan, count: int) -> list[dict[str, Any]]:
        """The table's newest ``count`` state rows (as ``last_applied``), newest first."""

    def close(self) -> None: ...


def state_from_row(row: Sequence[Any] | None) -> dict[str, Any] | None:
    """A state table row (batch_id, end_offset JSON, applied_at) -> ``Sink.last_applied``'s dict."""
    if row is None:
        return None
    batch_id, end_offset, applied_at = row
    return {
        "batch_id": int(batch_id),
        "end_offset": json.loads(end_offset) if end_offset else None,
        "applied_at": applied_at,
    }
