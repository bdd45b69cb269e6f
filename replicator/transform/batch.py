"""From ``ChangeEvent`` lists to the columnar change batch (``model.change_batch``).

The decoders and the snapshot reader fill change batches directly: no stream batch,
snapshot chunk or re-copy chunk is built from ``ChangeEvent``s, and nothing turns a batch
back into events (docs/decisions/one-data-plane.md). One user remains: verify, which reads
source rows as Python values (``verify.normalize``); tests build their batches with it.
``change_batch`` types every column as the decoders do (``source.arrow_types``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from replicator.model import change_batch as cb
from replicator.model.catalog import MySQLType
from replicator.model.changes import ChangeEvent
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
