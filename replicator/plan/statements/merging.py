"""A merged table's statements: the MERGE of the staged changes (the last per key) into the
target, the plain INSERT that replaces it for a copy into an empty target, and the DELETE
that ends a re-copy (rows no batch rewrote since the copy began).

The only literals are replicator's own constants ('d' for a delete, TRUE/FALSE for the
soft-delete flag).
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.model import STAGE_OP, STAGE_SEQ, STAGE_TS, PlannedColumn, TablePlan
from replicator.plan.statements.bookkeeping import state_name
from replicator.plan.statements.names import (
    ONE_PER_LINE,
    SOURCE_ALIAS,
    TARGET_ALIAS,
    q,
    staging_name,
    state_column,
    target_name,
)


def staging_select_item(column: PlannedColumn, dialect: Dialect) -> str:
    """How a target column's value is computed from the staging row."""
    target = q(column.target_column)
    if column.metadata == "synced_at":
        return f"{dialect.current_timestamp} AS {target}"
    staged = q(column.staging_name)
    if column.target_type.kind == "json":
        return f"{dialect.json_from_text.format(staged)} AS {target}"
    return staged if staged == target else f"{staged} AS {target}"


def _merge_source(table: TablePlan, dialect: Dialect) -> str:
    """The MERGE's source: the staged changes, the last per key."""
    key = [q(c.staging_name) for c in table.key_columns]
    merged = [c for c in table.columns if c.role != "soft_delete"]
    select = [staging_select_item(c, dialect) for c in merged]
    select += [q(STAGE_OP), q(STAGE_TS)]
    return (
        f"SELECT\n    {ONE_PER_LINE.join(select)}\n"
        f"  FROM {staging_name(table, dialect)}\n"
        f"  QUALIFY ROW_NUMBER() OVER (PARTITION BY {', '.join(key)} "
        f"ORDER BY {q(STAGE_SEQ)} DESC) = 1"
    )


def _merge_inserts(table: TablePlan) -> tuple[list[str], list[str]]:
    """The columns and values of the MERGE's WHEN NOT MATCHED ... INSERT."""
    src = q(SOURCE_ALIAS)
    merged = [c for c in table.columns if c.role != "soft_delete"]
    columns = [c.target_column for c in merged]
    values = [f"{src}.{q(c.target_column)}" for c in merged]
    if table.deletes == "soft":
        columns += [c.target_column for c in table.columns if c.role == "soft_delete"]
        values += ["FALSE", "NULL"]
    return columns, values


def insert_copied(table: TablePlan, dialect: Dialect) -> str:
    """The MERGE of a snapshot batch whose target had none of the copy's keys (it was empty
    when the copy began; chunks hold disjoint key ranges): only its WHEN NOT MATCHED branch
    can fire, so it is that branch alone, without the join."""
    src = q(SOURCE_ALIAS)
    columns, values = _merge_inserts(table)
    return (
        f"INSERT INTO {target_name(table, dialect)} (\n    {ONE_PER_LINE.join(q(c) for c in columns)}\n)\n"
        f"SELECT\n    {ONE_PER_LINE.join(values)}\n"
        f"FROM (\n  {_merge_source(table, dialect)}\n) AS {src}\n"
        f"WHERE {src}.{q(STAGE_OP)} <> 'd'"
    )


def target_has_rows(table: TablePlan, dialect: Dialect) -> str:
    """A row when the target holds any (a copy into an empty one inserts: ``insert_copied``)."""
    return f"SELECT 1 FROM {target_name(table, dialect)} LIMIT 1"


def merge(table: TablePlan, dialect: Dialect) -> str:
    """MERGE the staged changes into the target.

    The source is the staging table deduplicated to the last change per key (Snowflake
    rejects a MERGE where two source rows match one target row); deletes delete (or set
    _DELETED), everything else upserts; a re-insert after a soft delete revives the row.
    """
    tgt, src = q(TARGET_ALIAS), q(SOURCE_ALIAS)
    merged = [c for c in table.columns if c.role != "soft_delete"]
    source = _merge_source(table, dialect)
    on = " AND ".join(
        f"{tgt}.{q(c.target_column)} = {src}.{q(c.target_column)}"
        if not c.nullable
        else f"{tgt}.{q(c.target_column)} IS NOT DISTINCT FROM {src}.{q(c.target_column)}"
        for c in table.key_columns
    )

    def set_list(pairs: list[tuple[str, str]]) -> str:
        prefix = f"{tgt}." if dialect.qualified_update_set else ""
        return ONE_PER_LINE.join(f"{prefix}{q(name)} = {value}" for name, value in pairs)

    is_delete = f"{src}.{q(STAGE_OP)} = 'd'"
    non_key = [c for c in merged if not c.is_key]
    upsert_pairs = [(c.target_column, f"{src}.{q(c.target_column)}") for c in non_key]
    insert_columns, insert_values = _merge_inserts(table)
    if table.deletes == "soft":
        deleted, deleted_at = (c.target_column for c in table.columns if c.role == "soft_delete")
        metadata_pairs = [
            (c.target_column, f"{src}.{q(c.target_column)}") for c in merged if c.role == "metadata"
        ]
        on_delete = "UPDATE SET\n    " + set_list(
            [(deleted, "TRUE"), (deleted_at, f"{src}.{q(STAGE_TS)}"), *metadata_pairs]
        )
        upsert_pairs += [(deleted, "FALSE"), (deleted_at, "NULL")]
    else:
        on_delete = "DELETE"
    when_matched = f"WHEN MATCHED AND {is_delete} THEN {on_delete}\n"
    if upsert_pairs:
        when_matched += f"WHEN MATCHED THEN UPDATE SET\n    {set_list(upsert_pairs)}\n"
    return (
        f"MERGE INTO {target_name(table, dialect)} AS {tgt}\n"
        f"USING (\n  {source}\n) AS {src}\n"
        f"ON {on}\n"
        f"{when_matched}"
        f"WHEN NOT MATCHED AND {src}.{q(STAGE_OP)} <> 'd' THEN INSERT (\n"
        f"    {ONE_PER_LINE.join(q(c) for c in insert_columns)}\n"
        f") VALUES (\n    {ONE_PER_LINE.join(insert_values)}\n)"
    )


def synced_at_column(table: TablePlan) -> str | None:
    """The target column every MERGE stamps with the warehouse's time (metadata ``synced_at``)."""
    return next((c.target_column for c in table.columns if c.metadata == "synced_at"), None)


def deletes_not_rewritten(table: TablePlan) -> bool:
    """Whether a re-copy ends with ``delete_not_rewritten``: every write of the table's batches
    stamps ``_SYNCED_AT`` on the row it leaves (a merged table, hard deletes, one source
    table), so the rows not rewritten since the copy began are exactly the ones to delete."""
    return (table.mode == "merge" and table.deletes == "hard" and not table.routed
            and synced_at_column(table) is not None)


def delete_not_rewritten(table: TablePlan, dialect: Dialect) -> str:
    """The end of a table's re-copy (``engine.recopy``): delete the rows that no batch wrote
    since the copy's marker batch was recorded, i.e. the rows the source no longer has.
    Parameters: pipeline, table, the marker's batch id."""
    synced_at = synced_at_column(table)
    assert synced_at is not None
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (
        f"DELETE FROM {target_name(table, dialect)} WHERE {q(synced_at)} < ("
        f"SELECT {c('APPLIED_AT')} FROM {state_name(table, dialect)} "
        f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p} AND {c('BATCH_ID')} = {p})"
    )
