"""Bridges between ``ChangeEvent`` lists and the columnar change batch (``model.change_batch``).

The decoders and the snapshot reader fill change batches directly, and no stream batch,
snapshot chunk or re-copy chunk is built from ``ChangeEvent``s. Two users remain: an outbox
route's batch that Arrow's JSON reader cannot read exactly (``stage._per_row``: ``batch_events``
into ``sink.outbox``, the per-event path) and verify, which reads source rows as events
(``verify.normalize``: ``change_batch``); tests use both. Both directions keep values exact:
``change_batch`` types every column as the decoders do (``source.arrow_types``),
``batch_events`` gives back the values ``model.values`` documents (TIME stays MySQL text).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replicator.model import change_batch as cb
from replicator.model.catalog import MySQLType
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.text import time_text
from replicator.source.arrow_types import source_arrow_type as producers_type

if TYPE_CHECKING:
    import pyarrow as pa

def source_arrow_type(mysql_type: MySQLType | None) -> pa.DataType:
    """The Arrow type a MySQL column has in a change batch: the producers' one mapping
    (``source.arrow_types``); a column of unknown type is text."""
    import pyarrow as pa

    return pa.string() if mysql_type is None else producers_type(mysql_type)


def _cell(value: Any, mysql_type: MySQLType | None) -> Any:
    if isinstance(value, dt.timedelta):
        return time_text(value, (mysql_type.fsp if mysql_type else None) or 0)
    if isinstance(value, bool) and mysql_type is not None and mysql_type.name == "bit":
        return int(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def change_batch(
    events: Sequence[ChangeEvent],
    columns: Sequence[tuple[str, MySQLType | None]],
    key_columns: Sequence[str],
) -> pa.Table:
    """The change batch of ``events`` (all of one source table) over ``columns``."""
    import pyarrow as pa

    images = [(e.before if e.op == "d" else e.after) or {} for e in events]
    arrays: dict[str, pa.Array] = {}
    for name, mysql_type in columns:
        arrays[name] = pa.array([_cell(image.get(name), mysql_type) for image in images],
                                type=source_arrow_type(mysql_type))
    moved = [event.op == "u" and event.before is not None and event.after is not None
             and any(event.before.get(k) != event.after.get(k) for k in key_columns)
             for event in events]
    for name, mysql_type in columns:
        arrays[cb.before_column(name)] = pa.array(
            [_cell(e.before.get(name), mysql_type) if m and e.before else None
             for e, m in zip(events, moved, strict=True)], type=source_arrow_type(mysql_type))
    arrays[cb.OP] = pa.array([e.op for e in events], pa.string())
    arrays[cb.FILE] = pa.array([e.position.file for e in events], pa.string())
    arrays[cb.FILE_SEQ] = pa.array([e.position.sequence for e in events], pa.int64())
    arrays[cb.POS] = pa.array([e.position.pos for e in events], pa.int64())
    arrays[cb.ROW_INDEX] = pa.array([e.row_index for e in events], pa.int64())
    arrays[cb.TS_MS] = pa.array([e.ts_ms for e in events], pa.int64())
    arrays[cb.GTID] = pa.array([e.gtid for e in events], pa.string())
    arrays[cb.TRANSACTION_ID] = pa.array(
        [e.transaction_id or e.gtid or str(e.position) for e in events], pa.string())
    arrays[cb.TABLE] = pa.array([e.table for e in events], pa.string())
    return pa.table(arrays)


def batch_events(batch: pa.Table, key_columns: Sequence[str]) -> list[ChangeEvent]:
    """The ``ChangeEvent``s of a change batch (the per-row bridge, for paths not yet columnar).

    A key update gets its before-image from the batch's before columns (a batch landed with
    the old key only: the after-image with the old key); other updates carry only their
    after-image."""
    data = [name for name in batch.column_names if not cb.is_internal(name)]
    before_of = cb.before_columns(batch.column_names, tuple(key_columns))
    out = []
    for row in batch.to_pylist():
        image = {name: row[name] for name in data}
        op = row[cb.OP]
        before = after = None
        if op == "d":
            before = image
        else:
            after = image
            if op == "u" and any(row[b] is not None for b in before_of.values()):
                before = {**image, **{c: row[b] for c, b in before_of.items()}}
        out.append(ChangeEvent(
            table=row[cb.TABLE], op=op, position=BinlogPosition(row[cb.FILE], row[cb.POS]),
            row_index=row[cb.ROW_INDEX], ts_ms=row[cb.TS_MS], before=before, after=after,
            gtid=row[cb.GTID], transaction_id=row[cb.TRANSACTION_ID]))
    return out


