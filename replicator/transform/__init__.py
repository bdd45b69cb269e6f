"""The transform step: a table's change batch -> the staging rows of one target table.

``stage_batch(table, batch, first_seq=0)`` takes the change batch of ONE source table (an Arrow
table in the layout of ``model.change_batch``) and returns the Arrow table the sink loads into
the target's staging table: exactly the columns and types of
``plan.statements.tables.staging_columns(table)``: key-update split, compaction or every
change by mode, the row filter, column mapping, masks, computed columns, metadata and
internal columns; an outbox route's payloads flattened first (``transform.outbox``). It is
the only staging path (docs/decisions/one-data-plane.md).

The stream calls it from the driver on each table's change batch, the snapshot on each Arrow
chunk (op ``r``, and the deletes of rows a copy no longer finds). ``transform.batch`` builds a
change batch from ``ChangeEvent`` lists for verify and the tests (its module doc).
"""

from __future__ import annotations

from replicator.transform.batch import change_batch, source_arrow_type
from replicator.transform.stage import file_staging, snapshot_staging, stage_batch

__all__ = ["change_batch", "file_staging", "snapshot_staging", "source_arrow_type", "stage_batch"]
