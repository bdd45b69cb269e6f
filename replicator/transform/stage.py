"""``stage_batch``: a change batch -> staging rows (see the package docstring)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.model.pipeline import SOURCE_TABLE_COLUMN

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.plan.model import TablePlan


def batch_key(table: TablePlan) -> tuple[str, ...]:
    """The source key columns a change batch carries (a routed table's key also holds the
    source table's name, which is no column of the batch)."""
    return tuple(k for k in table.source_key if not (table.routed and k == SOURCE_TABLE_COLUMN))


def stage_batch(table: TablePlan, batch: pa.Table, *, first_seq: int = 0) -> pa.Table:
    """The staging rows of ``batch`` for ``table``; ``first_seq``: rows of the same sink
    batch staged before these (``STAGE_SEQ`` continues across slices)."""
    from replicator.sink.adapt import adapt_events
    from replicator.sink.staging import stage_changes
    from replicator.transform.batch import batch_events

    events = adapt_events(table, batch_events(batch, batch_key(table)))
    return stage_changes(table, events, first_seq=first_seq)
