"""Statements that follow the source's DDL on the target: columns added (with a constant MySQL
DEFAULT the target can hold the same), widened, renamed and dropped, and TRUNCATE.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
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
    """Widen a target column in place (``engine.schema_changes.widens`` said both warehouses
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
    """TRUNCATE in MySQL, followed: inside the batch's transaction, before its MERGE (which
    then holds only the changes after the TRUNCATE). A soft-deleting table marks its rows."""
    if table.deletes == "soft":
        deleted, deleted_at = (c.target_column for c in table.columns if c.role == "soft_delete")
        return (f"UPDATE {target_name(table, dialect)} SET {q(deleted)} = TRUE, "
                f"{q(deleted_at)} = {dialect.current_timestamp} WHERE NOT {q(deleted)}")
    return f"DELETE FROM {target_name(table, dialect)}"


def _named(table: TablePlan, name: str) -> str:
    return next(c.target_column for c in table.columns if c.role != "data"
                and c.target_column.upper() == name)


def truncate_history(table: TablePlan, dialect: Dialect) -> str:
    """TRUNCATE in MySQL, followed in a table that keeps history, after the batch that holds
    it is applied (its changes before the TRUNCATE are then in the table). Parameters
    (``truncate_history_params``) bind the TRUNCATE's position and commit time; the SQL is one
    statement that does nothing the second time, so a replayed batch records it once.

    changelog: one delete row (``_OP = 'd'``, the live row's image) per key whose latest change
    before the TRUNCATE's position is not a delete, at that position. scd2: every version
    current at the TRUNCATE (its last change before it; still current, or ended by a change
    after it in the same batch) ends at the TRUNCATE's commit time, ``_CHANGE_SEQ`` = its
    position, as a delete ends one."""
    target = target_name(table, dialect)
    if table.mode == "scd2":
        valid_to, is_current, seq = (_named(table, n) for n in ("_VALID_TO", "_IS_CURRENT",
                                                               "_CHANGE_SEQ"))
        return (f"UPDATE {target} SET {q(valid_to)} = ?, {q(is_current)} = FALSE, "
                f"{q(seq)} = ?\nWHERE {q(seq)} < ? AND ({q(is_current)} OR {q(valid_to)} > ?)")
    data = [c.target_column for c in table.columns if c.role == "data"]
    op, deleted, ts, file, pos, txid, order = (_named(table, n) for n in (
        "_OP", "_DELETED", "_TS_MS", "_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ID",
        "_TRANSACTION_ORDER"))
    key = ", ".join(q(c.target_column) for c in table.key_columns)
    columns = ", ".join(q(c) for c in [*data, op, deleted, ts, file, pos, txid, order])
    latest = ", ".join(f"{q(c)} DESC NULLS LAST" for c in (file, pos, order))
    return (
        f"INSERT INTO {target} ({columns})\n"
        f"SELECT {', '.join(q(c) for c in data)}, 'd', TRUE, ?, ?, ?, ?, "
        f"ROW_NUMBER() OVER (ORDER BY {key}) - 1\n"
        f"FROM (\n  SELECT * FROM {target}\n"
        f"  WHERE {q(file)} IS NULL OR {q(file)} < ? OR ({q(file)} = ? AND {q(pos)} < ?)\n"
        f"  QUALIFY ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {latest}) = 1\n"
        f") AS live\n"
        f"WHERE NOT COALESCE(live.{q(deleted)}, FALSE)\n"
        f"  AND NOT EXISTS (SELECT 1 FROM {target} WHERE {q(file)} = ? AND {q(pos)} = ?)")


def truncate_history_params(table: TablePlan, file: str, pos: int, ts_ms: int,
                            change_seq: str) -> tuple[Any, ...]:
    """The bind parameters of ``truncate_history``: the TRUNCATE's binlog position, its commit
    time (ms since the epoch) and its position as scd2's ``_CHANGE_SEQ`` text."""
    if table.mode == "scd2":
        at = datetime.datetime.fromtimestamp(ts_ms / 1000, tz=datetime.UTC)
        return (at, change_seq, change_seq, at)
    return (ts_ms, file, pos, f"{file}:{pos}", file, file, pos, file, pos)
