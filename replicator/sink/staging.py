"""ChangeEvents of one table -> the typed Arrow table both sinks load into staging.

What a staging row is depends on the table's mode: the last change per key (merge), every
change (changelog, and merge with ``log_table``: the MERGE then picks the last change per key
itself), or one version of a key (scd2, ``sink.versions``).

``stage_changes`` applies, in order: key-update split and compaction to the last change per
key (``model.compaction``); the row filter, when the caller gives one (a c/u/r whose
after-image fails it becomes a delete of its key, so a row that stops matching leaves the
target); the column mapping
(rename, exclude, mask, retype via ``sink.values``); metadata columns; and the internal
columns the MERGE needs (op, sequence, commit time). The columns and Arrow types are exactly
the staging table's (``plan.statements.tables.staging_columns``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from replicator.model.changes import ChangeEvent
from replicator.model.compaction import compact
from replicator.plan.model import (
    STAGE_CHANGE_SEQ,
    STAGE_OP,
    STAGE_SEQ,
    STAGE_TS,
    STAGE_VALID_TO,
    PlannedColumn,
    TablePlan,
)
from replicator.plan.statements.tables import staging_columns
from replicator.plan.types import TargetType
from replicator.sink.values import value_converter
from replicator.sink.versions import ordered_changes, versions

if TYPE_CHECKING:
    import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

# Metadata target column (before identifier folding) -> its value for one change.
METADATA_VALUES: dict[str, Callable[[ChangeEvent], Any]] = {
    "_OP": lambda e: e.op,
    "_TS_MS": lambda e: e.ts_ms,
    "_BINLOG_FILE": lambda e: e.position.file,
    "_BINLOG_POS": lambda e: e.position.pos,
    "_TRANSACTION_ID": lambda e: e.transaction_id or e.gtid or str(e.position),
    "_TRANSACTION_ORDER": lambda e: e.row_index,
    "_SOURCE_TABLE": lambda e: e.table,
    "_DELETED": lambda e: e.op == "d",
}


def arrow_type(target_type: TargetType, *, staging: bool = True) -> pa.DataType:
    """The exact Arrow type of a staging column of this target type."""
    import pyarrow as pa

    kind = target_type.kind
    if kind == "integer":
        return {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[
            target_type.bits or 64
        ]
    if kind == "decimal":
        return pa.decimal128(target_type.precision or 38, target_type.scale or 0)
    if kind == "float":
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "date":
        return pa.date32()
    if kind == "timestamp":
        return pa.timestamp("us")
    if kind == "timestamp_tz":
        return pa.timestamp("us", tz="UTC")
    if kind == "binary":
        return pa.binary()
    return pa.string()  # string, time_text, json (JSON text; parsed by the MERGE)


def staging_schema(table: TablePlan) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [pa.field(name, arrow_type(type_)) for name, type_ in staging_columns(table)]
    )


def _metadata_value(column: PlannedColumn) -> Callable[[ChangeEvent], Any]:
    return METADATA_VALUES[column.target_column.upper()]


def _ms_time(ms: int | None) -> dt.datetime | None:
    return None if ms is None else _EPOCH + dt.timedelta(milliseconds=ms)


def stage_changes(
    table: TablePlan, events: Sequence[ChangeEvent], *, first_seq: int = 0,
    passes: Callable[[dict[str, Any]], bool] | None = None,
) -> pa.Table:
    """The staging rows of ``events``; ``first_seq``: the batch's staged rows before these (a
    big batch is staged in slices and the MERGE orders a key's changes by ``STAGE_SEQ``
    across all of them).

    Filters and computed columns are evaluated by one engine, DuckDB, in the transform step
    (``transform.stage_batch``), never here: this per-row path stages outbox routes, which
    have neither. ``passes`` (tests): the filter, and the images already carry the computed
    values under ``PlannedColumn.image_key``."""
    if table.filter and passes is None:
        raise ValueError(f"{table.label}: stage_changes does not evaluate filters "
                         "(transform.stage_batch does)")
    extra: dict[str, list[Any]] = {}
    if table.mode == "scd2":
        tracked = [c.image_key for c in table.tracked_columns]
        found = versions(ordered_changes(events, table.source_key, passes), table.source_key, tracked)
        rows = [(v.op, v.image, v.event) for v in found]
        times = [v.valid_from_ms for v in found]
        extra[STAGE_VALID_TO] = [_ms_time(v.valid_to_ms) for v in found]
        extra[STAGE_CHANGE_SEQ] = [v.change_seq for v in found]
    elif table.keeps_every_change:
        rows = ordered_changes(events, table.source_key, passes)
        times = [event.ts_ms for _, _, event in rows]
    else:
        rows = []
        for event in compact(events, table.source_key):
            op = event.op
            image = event.before if op == "d" else event.after
            assert image is not None  # compact() checked
            if passes is not None and op != "d" and not passes(image):
                op = "d"  # the row no longer matches: remove its key from the target
            rows.append((op, image, event))
        times = [event.ts_ms for _, _, event in rows]
    return _to_arrow(table, rows, times, extra, first_seq)


def _to_arrow(
    table: TablePlan,
    rows: Sequence[tuple[str, dict[str, Any], ChangeEvent]],
    times: Sequence[int],
    extra: dict[str, list[Any]],
    first_seq: int = 0,
) -> pa.Table:
    import pyarrow as pa

    ops = [op for op, _, _ in rows]
    columns: dict[str, list[Any]] = {}
    for column in table.staged_columns:
        if column.role == "data":
            convert = value_converter(column)
            source = column.image_key
            columns[column.staging_name] = [convert(image.get(source)) for _, image, _ in rows]
        elif column.target_column.upper() == "_OP":
            columns[column.staging_name] = list(ops)
        elif column.target_column.upper() == "_DELETED":
            columns[column.staging_name] = [op == "d" for op in ops]
        else:
            value_of = _metadata_value(column)
            columns[column.staging_name] = [value_of(event) for _, _, event in rows]
    columns[STAGE_OP] = ops
    columns[STAGE_SEQ] = list(range(first_seq, first_seq + len(rows)))
    columns[STAGE_TS] = [_ms_time(ms) for ms in times]
    columns.update(extra)
    schema = staging_schema(table)
    arrays = [pa.array(columns[field.name], type=field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
