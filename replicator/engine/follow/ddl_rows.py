"""The rows of a batch around a followed DDL, as the target must get them.

Landed change files written before a column was added lack it: MySQL shows those rows with
the column's constant DEFAULT now, so the batch carries the DEFAULT into the target, not the
NULL a file without the column reads back as (``default_fills``, ``fill_defaults``); files
written before a followed column rename hold the values under the old name. A followed
TRUNCATE keeps only the changes after it (``after_position``) in a merged table; an scd2
table gets it as a delete of the keys changed after it (``truncate_deletes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition
from replicator.plan.statements.ddl import default_value
from replicator.source.arrow_types import source_arrow_type


@dataclass(frozen=True)
class DefaultFill:
    """Rows of landed files written before ``source_column`` existed: MySQL shows them with
    the column's DEFAULT now, so they carry it into the target (not the NULL a file without
    the column reads back as). ``ranges``: the (file_seq, pos) first..last transaction starts
    of those files."""

    source_column: str
    value: str | None  # the DEFAULT's text (``plan.statements.ddl.default_value``), cast ...
    arrow_type: Any
    ranges: tuple[tuple[tuple[int, int], tuple[int, int]], ...]
    from_column: str | None = None  # ... or, for a renamed column, its old name's values


def default_fills(table: Any, files: Sequence[dict[str, Any]],
                  renamed: dict[str, str] | None = None) -> list[DefaultFill]:
    """Which planned columns with a constant DEFAULT some of ``files`` (manifest rows of one
    batch) lack, by the file's schema fingerprint -- also when the column was added to the
    target at start-up because the catalog was ahead of the binlog being applied -- and which
    renamed columns (``renamed``: new source name -> old) files written before the rename
    hold under the old name."""
    renamed = {new.lower(): old for new, old in (renamed or {}).items()}
    fills = []
    for column in table.columns:
        if column.source_column is None or column.mysql_type is None or column.role != "data":
            continue
        old = renamed.get(column.source_column.lower())
        value = None if old is not None else default_value(column)
        if value is None and old is None:
            continue
        lacking = [row for row in files
                   if column.source_column not in _fingerprint_columns(str(row.get("fingerprint")))
                   and (old is None or old in _fingerprint_columns(str(row.get("fingerprint"))))]
        if lacking:
            fills.append(DefaultFill(
                column.source_column, value, source_arrow_type(column.mysql_type),
                tuple(((BinlogPosition(row["file"], 0).sequence, int(row["pos"])),
                       (BinlogPosition(row["last_file"], 0).sequence, int(row["last_pos"]))) for row in lacking),
                from_column=old))
    return fills


def fill_defaults(batch: Any, fills: Sequence[DefaultFill]) -> Any:
    """``batch`` (a change batch) with each fill's DEFAULT in its rows from files without the
    column (columnar: one mask per fill)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not fills or not batch.num_rows:
        return batch
    seq, pos = batch.column(cb.FILE_SEQ), batch.column(cb.POS)
    for fill in fills:
        mask = None
        for (first_seq, first_pos), (last_seq, last_pos) in fill.ranges:
            after_first = pc.or_(pc.greater(seq, first_seq),
                                 pc.and_(pc.equal(seq, first_seq), pc.greater_equal(pos, first_pos)))
            before_last = pc.or_(pc.less(seq, last_seq),
                                 pc.and_(pc.equal(seq, last_seq), pc.less_equal(pos, last_pos)))
            inside = pc.and_(after_first, before_last)
            mask = inside if mask is None else pc.or_(mask, inside)
        index = batch.schema.get_field_index(fill.source_column)
        if index < 0:
            batch = batch.append_column(fill.source_column,
                                        pa.nulls(batch.num_rows, type=fill.arrow_type))
            index = batch.schema.get_field_index(fill.source_column)
        current = batch.column(index)
        if fill.from_column is not None:
            value = batch.column(fill.from_column).cast(current.type)
        else:
            value = pa.scalar(fill.value).cast(current.type)
        batch = batch.set_column(index, batch.schema.field(index),
                                 pc.if_else(mask, value, current))
    return batch


def row_position(row: dict[str, Any], file: str = "file", pos: str = "pos") -> tuple[int, int]:
    """A manifest row's position as a cut (``after_position``) takes it: ``file``/``pos``
    its first change's (a DDL row's: the DDL's), ``last_file``/``last_pos`` its last one's."""
    return BinlogPosition(row[file], 0).sequence, int(row[pos])


def last_before(head: BinlogPosition) -> tuple[int, int]:
    """The last position before ``head`` as a cut: a transaction starting at the head (the
    first one after it) is at ``head`` itself, so it is kept."""
    return head.sequence, head.pos - 1


def after_position(batch: Any, position: tuple[int, int], *, table: str | None = None) -> Any:
    """The changes of ``batch`` after ``position`` (a followed TRUNCATE's: the ones before it
    were emptied with the table); ``table`` (``db.table``, any case): only that source
    table's changes are cut, the others' all kept (a routed target's batch)."""
    import pyarrow.compute as pc

    if not batch.num_rows:
        return batch
    seq, pos = batch.column(cb.FILE_SEQ), batch.column(cb.POS)
    keep = pc.or_(pc.greater(seq, position[0]),
                  pc.and_(pc.equal(seq, position[0]), pc.greater(pos, position[1])))
    if table is not None:
        keep = pc.or_(pc.not_equal(pc.utf8_lower(batch.column(cb.TABLE)), table.lower()), keep)
    return batch.filter(keep)


def truncate_deletes(batch: Any, truncates: Sequence[Any], key: Sequence[str]) -> Any:
    """scd2: each followed TRUNCATE (``plan.program.TruncateAt``) as a delete, at its
    position and commit time, of every key ``batch`` changes after it (its image: the key's
    first change after it; only the key matters to a delete). The batch's versions then end
    there, and a key inserted again after it opens a new version even with the same tracked
    columns, as after a DELETE. Keys the batch does not change after it are ended in the
    warehouse (``plan.statements.ddl.truncate_history``). In binlog order, as a batch is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not batch.num_rows or not key or not truncates:
        return batch
    index = "__replicator_truncate_index"
    pieces = [batch]
    for at in truncates:
        after = after_position(batch, (at.sequence, at.pos))
        if at.source is not None:  # a routed target's: the truncated table's keys only
            after = after.filter(pc.equal(pc.utf8_lower(after.column(cb.TABLE)),
                                          at.source.lower()))
        if not after.num_rows:
            continue
        numbered = after.append_column(index, pa.array(range(after.num_rows), pa.int64()))
        firsts = numbered.group_by(list(key), use_threads=False).aggregate([(index, "min")])
        rows = after.take(firsts.column(f"{index}_min"))
        count = rows.num_rows
        values = {cb.OP: "d", cb.FILE: at.file, cb.FILE_SEQ: at.sequence, cb.POS: at.pos,
                  cb.ROW_INDEX: 0, cb.TS_MS: at.ts_ms, cb.GTID: None,
                  cb.TRANSACTION_ID: f"{at.file}:{at.pos}"}
        for number, field in enumerate(rows.schema):
            if field.name in values:
                column = pa.array([values[field.name]] * count, field.type)
            elif cb.is_before(field.name) or field.name.startswith(cb.LEGACY_BEFORE_KEY):
                column = pa.nulls(count, field.type)  # a delete of the key, not a key move
            else:
                continue
            rows = rows.set_column(number, field, column)
        pieces.append(rows)
    if len(pieces) == 1:
        return batch
    merged = pa.concat_tables(pieces)
    order = pc.sort_indices(merged, [(name, "ascending") for name in cb.ORDER_COLUMNS])
    return merged.take(order)


@lru_cache(maxsize=256)
def _fingerprint_columns(fingerprint: str) -> frozenset[str]:
    """The column names in a landed file's fingerprint: the stream's decoder writes
    ``name:type|name:type`` (``source.fast.columnar``), a file landed from Arrow writes
    ``str(pyarrow.Schema)`` (one ``name: type`` line per column, nested fields indented)."""
    if "\n" in fingerprint or ": " in fingerprint:
        return frozenset(line.split(":", 1)[0] for line in fingerprint.splitlines()
                         if line and not line[0].isspace() and ":" in line)
    return frozenset(part.rsplit(":", 1)[0] for part in fingerprint.split("|") if ":" in part)
