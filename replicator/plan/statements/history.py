"""Tables that keep history: a changelog table (or a merged table's log table) appends every
staged change; an scd2 table keeps one row per version of a key, with its validity interval.

Nothing here rewrites history: a replayed batch appends nothing (its state row exists), and
scd2 drops the staged versions the target already holds or has moved past.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.model import (
    STAGE_CHANGE_SEQ,
    STAGE_OP,
    STAGE_SEQ,
    STAGE_TS,
    STAGE_VALID_TO,
    PlannedColumn,
    TablePlan,
)
from replicator.plan.statements.merging import staging_select_item
from replicator.plan.statements.names import (
    ONE_PER_LINE,
    SOURCE_ALIAS,
    TARGET_ALIAS,
    log_name,
    q,
    staging_name,
    target_name,
)

# -- changelog: append every staged change ----------------------------------------------------

def _append_value(column: PlannedColumn, dialect: Dialect) -> str:
    staged = q(column.staging_name)
    if column.target_type.kind == "json":
        return dialect.json_from_text.format(staged)
    return staged


def append_changes(table: TablePlan, dialect: Dialect, *, log: bool = False) -> str:
    """INSERT every staged change, in binlog order, into a changelog table (or the log table).

    Append-only and never compacted; a replayed batch appends nothing because the sink skips a
    batch whose state row exists, and this INSERT commits with that state row.
    """
    columns = table.log_columns if log else table.columns
    into = log_name(table, dialect) if log else target_name(table, dialect)
    return (
        f"INSERT INTO {into} (\n    {ONE_PER_LINE.join(q(c.target_column) for c in columns)}\n)\n"
        f"SELECT\n    {ONE_PER_LINE.join(_append_value(c, dialect) for c in columns)}\n"
        f"  FROM {staging_name(table, dialect)}\n"
        f"  ORDER BY {q(STAGE_SEQ)}"
    )


# -- SCD type 2: versions ---------------------------------------------------------------------

def _scd2_column(table: TablePlan, name: str) -> str:
    return next(c.target_column for c in table.columns if c.role == "scd2" and c.target_column.upper() == name)


def _same_key(table: TablePlan, left: str, right: str, *, staged_right: bool = True) -> str:
    """Key equality between a target row (`left`) and a staged row (`right`)."""
    parts = []
    for c in table.key_columns:
        right_name = c.staging_name if staged_right else c.target_column
        op = "=" if not c.nullable else "IS NOT DISTINCT FROM"
        parts.append(f"{left}.{q(c.target_column)} {op} {right}.{q(right_name)}")
    return " AND ".join(parts)


def _same_tracked(table: TablePlan, left: str, right: str) -> str:
    """The tracked columns of a target version equal those of a staged version."""
    parts = [
        f"{left}.{q(c.target_column)} IS NOT DISTINCT FROM {right}.{q(c.target_column)}"
        for c in table.tracked_columns
    ]
    return " AND ".join(parts) if parts else "TRUE"


def scd2_drop_replayed(table: TablePlan, dialect: Dialect) -> str:
    """Drop staged versions the target already holds or has moved past (a replay, or a change
    older than the key's newest applied change): history is never rewritten or doubled."""
    seq = q(_scd2_column(table, "_CHANGE_SEQ"))
    staging = staging_name(table, dialect)
    return (
        f"DELETE FROM {staging}\n"
        f"WHERE EXISTS (\n"
        f"  SELECT 1 FROM {target_name(table, dialect)} AS {q(TARGET_ALIAS)}\n"
        f"  WHERE {_same_key(table, q(TARGET_ALIAS), staging)}\n"
        f"    AND {q(TARGET_ALIAS)}.{seq} >= {staging}.{q(STAGE_CHANGE_SEQ)}\n"
        f")"
    )


def _scd2_source(table: TablePlan, dialect: Dialect, *, first_only: bool) -> str:
    data = [c for c in table.columns if c.role != "scd2"]
    select = [staging_select_item(c, dialect) for c in data]
    select += [q(STAGE_OP), q(STAGE_SEQ), q(STAGE_TS), q(STAGE_VALID_TO), q(STAGE_CHANGE_SEQ)]
    key = ", ".join(q(c.staging_name) for c in table.key_columns)
    qualify = (
        f"\n  QUALIFY ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {q(STAGE_SEQ)}) = 1"
        if first_only
        else ""
    )
    return f"SELECT\n    {ONE_PER_LINE.join(select)}\n  FROM {staging_name(table, dialect)}{qualify}"


def scd2_insert_versions(table: TablePlan, dialect: Dialect) -> str:
    """INSERT the batch's new versions; a key's first version whose tracked columns equal the
    target's current version is not new (the next statement updates that version in place)."""
    tgt, src = q(TARGET_ALIAS), q(SOURCE_ALIAS)
    valid_from, valid_to, is_current, seq = (
        _scd2_column(table, n) for n in ("_VALID_FROM", "_VALID_TO", "_IS_CURRENT", "_CHANGE_SEQ")
    )
    data = [c for c in table.columns if c.role != "scd2"]
    names = [c.target_column for c in data] + [valid_from, valid_to, is_current, seq]
    values = [f"{src}.{q(c.target_column)}" for c in data] + [
        f"{src}.{q(STAGE_TS)}",
        f"{src}.{q(STAGE_VALID_TO)}",
        f"{src}.{q(STAGE_VALID_TO)} IS NULL",
        f"{src}.{q(STAGE_CHANGE_SEQ)}",
    ]
    s2 = q("s2")
    same_key = " AND ".join(
        f"{s2}.{q(c.staging_name)} {'IS NOT DISTINCT FROM' if c.nullable else '='} "
        f"{src}.{q(c.target_column)}"
        for c in table.key_columns
    )
    first = (
        f"{src}.{q(STAGE_SEQ)} = (SELECT MIN({s2}.{q(STAGE_SEQ)}) "
        f"FROM {staging_name(table, dialect)} AS {s2} WHERE {same_key})"
    )
    return (
        f"INSERT INTO {target_name(table, dialect)} (\n    {ONE_PER_LINE.join(q(n) for n in names)}\n)\n"
        f"SELECT\n    {ONE_PER_LINE.join(values)}\n"
        f"FROM (\n  {_scd2_source(table, dialect, first_only=False)}\n) AS {src}\n"
        f"WHERE {src}.{q(STAGE_OP)} <> 'd'\n"
        f"  AND NOT (\n"
        f"    {first}\n"
        f"    AND EXISTS (\n"
        f"      SELECT 1 FROM {target_name(table, dialect)} AS {tgt}\n"
        f"      WHERE {_same_key(table, tgt, src, staged_right=False)}\n"
        f"        AND {tgt}.{q(is_current)}\n"
        f"        AND {_same_tracked(table, tgt, src)}\n"
        f"    )\n"
        f"  )\n"
        f"ORDER BY {src}.{q(STAGE_SEQ)}"
    )


def scd2_update_current(table: TablePlan, dialect: Dialect) -> str:
    """The target's current version of each key the batch touches: ended by a delete or by a
    new version, or updated in place when its tracked columns did not change."""
    tgt, src = q(TARGET_ALIAS), q(SOURCE_ALIAS)
    valid_to, is_current, seq = (
        _scd2_column(table, n) for n in ("_VALID_TO", "_IS_CURRENT", "_CHANGE_SEQ")
    )
    prefix = f"{tgt}." if dialect.qualified_update_set else ""

    def set_list(pairs: list[tuple[str, str]]) -> str:
        return ONE_PER_LINE.join(f"{prefix}{q(name)} = {value}" for name, value in pairs)

    in_place = [
        (c.target_column, f"{src}.{q(c.target_column)}")
        for c in table.columns
        if c.role != "scd2" and not c.is_key
    ]
    in_place += [
        (valid_to, f"{src}.{q(STAGE_VALID_TO)}"),
        (is_current, f"{src}.{q(STAGE_VALID_TO)} IS NULL"),
        (seq, f"{src}.{q(STAGE_CHANGE_SEQ)}"),
    ]
    ended_by_delete = [
        (valid_to, f"{src}.{q(STAGE_TS)}"),
        (is_current, "FALSE"),
        (seq, f"{src}.{q(STAGE_CHANGE_SEQ)}"),
    ]
    ended_by_version = [(valid_to, f"{src}.{q(STAGE_TS)}"), (is_current, "FALSE")]
    return (
        f"MERGE INTO {target_name(table, dialect)} AS {tgt}\n"
        f"USING (\n  {_scd2_source(table, dialect, first_only=True)}\n) AS {src}\n"
        f"ON {_same_key(table, tgt, src, staged_right=False)}\n"
        f"  AND {tgt}.{q(is_current)}\n"
        f"  AND {tgt}.{q(seq)} < {src}.{q(STAGE_CHANGE_SEQ)}\n"
        f"WHEN MATCHED AND {src}.{q(STAGE_OP)} = 'd' THEN UPDATE SET\n"
        f"    {set_list(ended_by_delete)}\n"
        f"WHEN MATCHED AND {_same_tracked(table, tgt, src)} THEN UPDATE SET\n"
        f"    {set_list(in_place)}\n"
        f"WHEN MATCHED THEN UPDATE SET\n"
        f"    {set_list(ended_by_version)}"
    )
