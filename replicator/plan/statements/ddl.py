"""Statements that follow the source's DDL on the target: columns added (with a constant MySQL
DEFAULT the target can hold the same), widened, renamed and dropped, and TRUNCATE.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replicator.plan.dialects import Dialect
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.statements.names import log_name, q, target_name
from replicator.plan.types import TargetType


def add_columns(
    table: TablePlan, columns: Sequence[PlannedColumn], dialect: Dialect, *, log: bool = False
) -> list[str]:
    """ALTER TABLE for columns the target (or its log table) lacks (columns added to the
    source mid-stream).

    New columns are always nullable. A column with a constant MySQL DEFAULT gets it as the
    target's DEFAULT, so the rows already in the target take it, as MySQL shows them (an ADD
    COLUMN ... NOT NULL DEFAULT 7 gives every old row 7); one statement, so it is all or
    nothing. A log table's old rows are history: they keep NULL.
    """
    definitions = []
    for c in columns:
        default = None if log else default_literal(c, dialect)
        definitions.append(f"{q(c.target_column)} {dialect.type_name(c.target_type)}"
                           + (f" DEFAULT {default}" if default is not None else ""))
    target = log_name(table, dialect) if log else target_name(table, dialect)
    if not definitions:
        return []
    if dialect.multiple_alter_actions:  # Snowflake's form: ADD COLUMN a T1, b T2
        return [f"ALTER TABLE {target} ADD COLUMN " + ", ".join(definitions)]
    return [f"ALTER TABLE {target} ADD COLUMN {definition}" for definition in definitions]


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_TEMPORAL = re.compile(r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$")


def default_value(column: PlannedColumn) -> str | None:
    """The text of a column's constant MySQL DEFAULT, None for none or one that is not a
    constant the target can hold the same (an expression such as CURRENT_TIMESTAMP, a
    TIMESTAMP's text -- it is in the session's zone --, a zero date, a default of a masked or
    computed column). It is schema, read from information_schema (MariaDB quotes string
    defaults, writes numbers bare and NULL as NULL), never a row value."""
    text = column.source_default
    if text is None or column.mask is not None or column.expression is not None:
        return None
    text = text.strip()
    if text.upper() == "NULL":
        return None
    quoted = len(text) >= 2 and text[0] == text[-1] == "'"
    value = text[1:-1].replace("''", "'") if quoted else text
    kind = column.target_type.kind
    if kind in ("integer", "decimal", "float"):
        return value if _NUMBER.match(value) else None
    if kind == "boolean":
        return value if value in ("0", "1") else None
    if kind in ("date", "timestamp") and quoted:
        return value if _TEMPORAL.match(value) and not value.startswith("0000") else None
    if kind == "string" and quoted and (column.mysql_type is None
                                        or column.mysql_type.name not in ("json", "bit")):
        return value
    return None


def default_literal(column: PlannedColumn, dialect: Dialect) -> str | None:
    """``default_value`` as a target literal: numbers bare, booleans TRUE/FALSE, the rest a
    string with its quotes doubled (and its backslashes where the dialect escapes with them)."""
    value = default_value(column)
    if value is None:
        return None
    kind = column.target_type.kind
    if kind in ("integer", "decimal", "float"):
        return value
    if kind == "boolean":
        return "TRUE" if value == "1" else "FALSE"
    if dialect.backslash_escapes:
        value = value.replace("\\", "\\\\")
    return "'" + value.replace("'", "''") + "'"


def alter_column_type(table: TablePlan, column: str, target_type: TargetType,
                      dialect: Dialect) -> str:
    """Widen a target column in place (``engine.follow.schema_changes.widens`` said both warehouses
    can); running it again is harmless, so a replayed batch may."""
    return (f"ALTER TABLE {target_name(table, dialect)} ALTER COLUMN {q(column)} "
            f"SET DATA TYPE {dialect.type_name(target_type)}")


def rename_column(table: TablePlan, old: str, new: str, dialect: Dialect, *,
                  log: bool = False) -> str:
    name = log_name(table, dialect) if log else target_name(table, dialect)
    return f"ALTER TABLE {name} RENAME COLUMN {q(old)} TO {q(new)}"


def drop_column(table: TablePlan, column: str, dialect: Dialect, *, log: bool = False) -> str:
    name = log_name(table, dialect) if log else target_name(table, dialect)
    return f"ALTER TABLE {name} DROP COLUMN {q(column)}"


def drop_not_null(table: TablePlan, column: str, dialect: Dialect) -> str:
    """A column dropped in MySQL but kept in the target gets NULL from then on."""
    return f"ALTER TABLE {target_name(table, dialect)} ALTER COLUMN {q(column)} DROP NOT NULL"


def drop_default(table: TablePlan, column: str, dialect: Dialect) -> str:
    """... and not the DEFAULT it was added with (``add_columns``)."""
    return f"ALTER TABLE {target_name(table, dialect)} ALTER COLUMN {q(column)} DROP DEFAULT"


def truncate_rows(table: TablePlan, dialect: Dialect) -> str:
    """TRUNCATE in MySQL, followed in a merged table: a statement of the transaction of the
    batch that holds it, before its MERGE (which then holds only the changes after the
    TRUNCATE: ``program.truncate_records``). A soft-deleting table marks its rows. A routed
    target holds many source tables' rows: only the truncated one's go (parameter: its
    ``db.table``, as ``_SOURCE_TABLE`` holds it)."""
    shard = f"{q(source_table_of(table))} = ?" if table.routed else ""
    if table.deletes == "soft":
        deleted, deleted_at = (c.target_column for c in table.columns if c.role == "soft_delete")
        return (f"UPDATE {target_name(table, dialect)} SET {q(deleted)} = TRUE, "
                f"{q(deleted_at)} = {dialect.current_timestamp} WHERE NOT {q(deleted)}"
                + (f" AND {shard}" if shard else ""))
    return f"DELETE FROM {target_name(table, dialect)}" + (f" WHERE {shard}" if shard else "")


def source_table_of(table: TablePlan) -> str:
    """A routed target's ``_SOURCE_TABLE`` column (its name as the plan cased it)."""
    return table.key_columns[0].target_column


def _named(table: TablePlan, name: str) -> str:
    return next(c.target_column for c in table.columns if c.role != "data"
                and c.target_column.upper() == name)


@dataclass(frozen=True)
class TruncateAt:
    """A followed TRUNCATE TABLE inside a batch: its binlog file, the file's number (positions
    order by it, then ``pos``: ``engine.follow.ddl_rows.row_position``), its position, its commit
    time (ms since the epoch) and its position as scd2's ``_CHANGE_SEQ`` text
    (``model.change_batch.change_seq_at``)."""

    file: str
    sequence: int
    pos: int
    ts_ms: int
    change_seq: str
    # A routed target's truncated source table (``db.table`` as ``_SOURCE_TABLE`` holds it):
    # only its rows are emptied; None for a table of its own.
    source: str | None = None


def file_sequence(column: str) -> str:
    """A ``_BINLOG_FILE`` column's number (``mysql-bin.000012`` -> 12), the order of binlog
    files everywhere else (``model.changes.BinlogPosition.sequence``): as text, a seventh
    digit would sort ``1000000`` before ``999999``."""
    return f"CAST(SPLIT_PART({column}, '.', -1) AS BIGINT)"


def truncate_history(table: TablePlan, dialect: Dialect) -> str:
    """TRUNCATE in MySQL, followed in a table that keeps history: run in the transaction of
    the batch that holds it, after the batch's own statements (``program.table_changes``).
    Parameters (``truncate_history_params``) bind the TRUNCATE's position and commit time.

    changelog: one delete row (``_OP = 'd'``, the live row's image) per key whose latest
    change before the TRUNCATE's position is not a delete, at that position. The batch's
    changes are in the table by then, each at its own position: those before the TRUNCATE
    count, those after it do not, exactly as if it had run between them.

    scd2: every version still current whose last change is before the TRUNCATE ends at its
    commit time, ``_CHANGE_SEQ`` = its position, as a delete ends one. The batch staged the
    TRUNCATE as a delete of every key it changes after it (``engine.follow.ddl_rows.
    truncate_deletes``), so those keys' versions ended there already and their versions
    after it are new; what is left current before it is the keys the batch did not touch
    after it."""
    target = target_name(table, dialect)
    if table.mode == "scd2":
        valid_to, is_current, seq = (_named(table, n) for n in ("_VALID_TO", "_IS_CURRENT",
                                                               "_CHANGE_SEQ"))
        return (f"UPDATE {target} SET {q(valid_to)} = ?, {q(is_current)} = FALSE, "
                f"{q(seq)} = ?\nWHERE {q(is_current)} AND {q(seq)} < ?"
                + (f" AND {q(source_table_of(table))} = ?" if table.routed else ""))
    data = [c.target_column for c in table.columns if c.role == "data"]
    op, deleted, ts, file, pos, txid, order = (_named(table, n) for n in (
        "_OP", "_DELETED", "_TS_MS", "_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ID",
        "_TRANSACTION_ORDER"))
    key = ", ".join(q(c.target_column) for c in table.key_columns)
    columns = ", ".join(q(c) for c in [*data, op, deleted, ts, file, pos, txid, order])
    sequence = file_sequence(q(file))
    # Newest first, as ``model.change_batch.CHANGE_SEQ_FORMAT`` orders: a snapshot read (``r``) carries
    # the position the next transaction starts at, so at one position it is the older; rows
    # without a position (none are written so) count as the oldest.
    latest = ", ".join([*(f"COALESCE({c}, -1) DESC" for c in (sequence, q(pos))),
                        f"CASE WHEN {q(op)} = 'r' THEN 0 ELSE 1 END DESC",
                        f"COALESCE({q(order)}, -1) DESC"])
    return (
        f"INSERT INTO {target} ({columns})\n"
        f"SELECT {', '.join(q(c) for c in data)}, 'd', TRUE, ?, ?, ?, ?, "
        f"ROW_NUMBER() OVER (ORDER BY {key}) - 1\n"
        f"FROM (\n"
        f"  SELECT *, ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {latest}) AS {q('_LATEST')}\n"
        f"  FROM {target}\n"
        f"  WHERE ({q(file)} IS NULL OR {sequence} < ? OR ({sequence} = ? AND {q(pos)} < ?))"
        + (f" AND {q(source_table_of(table))} = ?" if table.routed else "") + "\n"
        f") AS live\n"
        f"WHERE live.{q('_LATEST')} = 1 AND NOT COALESCE(live.{q(deleted)}, FALSE)")


def truncate_history_params(table: TablePlan, at: TruncateAt) -> tuple[Any, ...]:
    """The bind parameters of ``truncate_history`` for the TRUNCATE ``at``."""
    shard = (at.source,) if table.routed else ()
    if table.mode == "scd2":
        when = datetime.datetime.fromtimestamp(at.ts_ms / 1000, tz=datetime.UTC)
        return (when, at.change_seq, at.change_seq, *shard)
    return (at.ts_ms, at.file, at.pos, f"{at.file}:{at.pos}", at.sequence, at.sequence, at.pos,
            *shard)
