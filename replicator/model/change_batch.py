"""The columnar change batch: the contract between the decoders, the transforms and the sink.

A change batch is one Arrow table holding the changes of ONE source table, in binlog order,
one row per row change (the snapshot uses the same layout with op ``r``). It replaces the
per-row ``ChangeEvent`` on the hot path: the fast binlog decoder and the snapshot reader fill
it on executors, the transform step (``replicator.transform``) turns it into the staging
layout of a target table, and the staging rows land as Parquet files for the sink.

Columns:

- the row image, one column per source column, named exactly as MySQL names it, typed by
  ``source_arrow_type`` of the producer (DECIMAL exact, BIGINT UNSIGNED as uint64,
  DATETIME(6) as timestamp[us], TIMESTAMP as timestamp[us, UTC], TIME in MySQL's text form,
  JSON/ENUM/SET as text, BIT as int, bytes as binary). For ``c``/``u``/``r`` it is the
  after-image, for ``d`` the before-image (the row that was deleted);
- the internal columns below, all starting with ``INTERNAL_PREFIX`` so they can never collide
  with a MySQL column in practice;
- the sparse before-image: ``before_column(c)`` for EVERY source column ``c``, holding the
  row as it was BEFORE an update that changed the key, and NULL on every other row. The
  transform turns such an update into a delete of the old row plus an upsert of the new one;
  the delete half carries the old image whole (a changelog / log / scd2 row records what was
  deleted, and a row filter tests the old row). Why sparse columns and not a before-image per
  update: key-changing updates are rare, an all-NULL Arrow column costs a validity bitmap,
  and Parquet stores it in a few bytes per row group, so the common batch pays ~nothing,
  while the columns keep the layout flat (one row per change, the after-image's types).
  A key-changing update is recognised by ANY before column being set (a declared key may be
  nullable: NULL -> 5 still has its other old columns). Tables without a key never set them.

The total order of changes on one server is (FILE_SEQ, POS, ROW_INDEX): compaction keeps the
last change per key by it, exactly as ``ChangeEvent.order``.
"""

from __future__ import annotations

from collections.abc import Sequence

INTERNAL_PREFIX = "__replicator_"

OP = INTERNAL_PREFIX + "op"  # string: c insert, u update, d delete, r snapshot read
FILE = INTERNAL_PREFIX + "file"  # string: binlog file of the transaction's start
FILE_SEQ = INTERNAL_PREFIX + "file_seq"  # int64: numeric suffix of FILE
POS = INTERNAL_PREFIX + "pos"  # int64: the transaction's start position in FILE
ROW_INDEX = INTERNAL_PREFIX + "row_index"  # int64: index of the row change in its transaction
TS_MS = INTERNAL_PREFIX + "ts_ms"  # int64: commit time, ms since the epoch
GTID = INTERNAL_PREFIX + "gtid"  # string or NULL
TRANSACTION_ID = INTERNAL_PREFIX + "transaction_id"  # string: GTID, else file:pos of BEGIN
TABLE = INTERNAL_PREFIX + "table"  # string: "db.table" as the server names it

INTERNAL_COLUMNS: tuple[str, ...] = (OP, FILE, FILE_SEQ, POS, ROW_INDEX, TS_MS, GTID,
                                     TRANSACTION_ID, TABLE)
ORDER_COLUMNS: tuple[str, ...] = (FILE_SEQ, POS, ROW_INDEX)

_BEFORE = INTERNAL_PREFIX + "before__"
# Batches landed before the whole before-image existed carried the old key only, under this
# prefix; the transform still reads them (a landed batch may be applied after an upgrade).
LEGACY_BEFORE_KEY = INTERNAL_PREFIX + "before_key__"


def before_column(source_column: str) -> str:
    """The column holding ``source_column``'s value before an update that changed the key."""
    return _BEFORE + source_column


def is_before(name: str) -> bool:
    return name.startswith(_BEFORE)


def before_columns(columns: Sequence[str], key: Sequence[str]) -> dict[str, str]:
    """Source column -> the column of a batch with these ``columns`` holding its value
    before a key-changing update (``key``: the key columns, for legacy batches)."""
    names = set(columns)
    found = {name: before_column(name) for name in columns
             if not is_internal(name) and before_column(name) in names}
    if found:
        return found
    # A batch landed before the whole before-image existed: the old key only (its delete
    # half then carries the new row's other columns, as it did then).
    return {k: LEGACY_BEFORE_KEY + k for k in key if LEGACY_BEFORE_KEY + k in names}


def is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


__all__ = [
    "FILE", "FILE_SEQ", "GTID", "INTERNAL_COLUMNS", "INTERNAL_PREFIX", "LEGACY_BEFORE_KEY", "OP",
    "ORDER_COLUMNS", "POS", "ROW_INDEX", "TABLE", "TRANSACTION_ID", "TS_MS", "before_column",
    "before_columns", "is_before", "is_internal",
]


# A change's binlog position as text that sorts like (FILE_SEQ, POS, ROW_INDEX), a snapshot
# read (``r``, marked 0) before the changes of the transaction starting where it was read
# (marked 1), whose effect the copy did not see: SCD2's _CHANGE_SEQ (``transform.stage``
# formats it in SQL with this pattern, ``plan.statements.ddl`` compares it).
# (file sequence, position, row index): their zero-padded widths in the text.
CHANGE_SEQ_WIDTHS = (10, 20, 10)
CHANGE_SEQ_FORMAT = "%0{}d.%0{}d.%d%0{}d".format(*CHANGE_SEQ_WIDTHS)


def change_seq_at(sequence: int, pos: int) -> str:
    """The change sequence of a statement at binlog file ``sequence``, position ``pos`` that
    has no rows (a followed TRUNCATE): after a snapshot read there, before any row after it."""
    return CHANGE_SEQ_FORMAT % (sequence, pos, 1, 0)
