"""CREATE of a table's target, log and staging tables (and their schema), the target's PRIMARY
KEY and its rebuild when the source's key changed, and the read of a table's columns that the
setup compares with the plan.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.identifiers import qualified_name
from replicator.plan.model import (
    STAGE_CHANGE_SEQ,
    STAGE_OP,
    STAGE_SEQ,
    STAGE_TS,
    STAGE_VALID_TO,
    TablePlan,
)
from replicator.plan.statements.names import (
    column_definition,
    log_name,
    namespace,
    q,
    staging_name,
    target_name,
)
from replicator.plan.types import TargetType, integer

INTERNAL_STAGE_TYPES: tuple[tuple[str, TargetType], ...] = (
    (STAGE_OP, TargetType("string")),
    (STAGE_SEQ, integer(19, 64)),
    (STAGE_TS, TargetType("timestamp_tz", fsp=6)),
)
SCD2_STAGE_TYPES: tuple[tuple[str, TargetType], ...] = (
    (STAGE_VALID_TO, TargetType("timestamp_tz", fsp=6)),
    (STAGE_CHANGE_SEQ, TargetType("string")),
)


def create_schema(table: TablePlan, dialect: Dialect) -> str | None:
    if not dialect.create_schema:
        return None
    return f"CREATE SCHEMA IF NOT EXISTS {qualified_name(namespace(table, dialect))}"


def primary_key(table: TablePlan) -> list[str]:
    """The target columns of the target's PRIMARY KEY ([]: none). Only where every key column
    is NOT NULL (it would reject NULL keys), and only where a key has one row (changelog and
    scd2 tables hold many rows per key)."""
    key = table.key_columns
    if table.mode == "merge" and key and all(not c.nullable for c in key):
        return [c.target_column for c in key]
    return []


def create_target_table(table: TablePlan, dialect: Dialect) -> str:
    lines = [
        column_definition(c.target_column, dialect.type_name(c.target_type), c.nullable)
        for c in table.columns
    ]
    key = primary_key(table)
    if key:
        lines.append(f"PRIMARY KEY ({', '.join(q(name) for name in key)})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {target_name(table, dialect)} (\n  {body}\n)"


def read_primary_key(table: TablePlan, dialect: Dialect) -> tuple[str, tuple[str, ...]]:
    """The target's PRIMARY KEY columns as the target enforces them (DuckDB's catalog), and
    the parameters: its schema, its table name, the constraint type."""
    # DuckDB matches names case-blind ("MAIN" is the schema main).
    sql = ("SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = "
           f"lower({dialect.parameter}) AND lower(table_name) = lower({dialect.parameter}) "
           f"AND constraint_type = {dialect.parameter}")
    return sql, (namespace(table, dialect)[-1], table.target_table, "PRIMARY KEY")


def rekey_target(table: TablePlan, dialect: Dialect) -> list[str]:
    """Rebuild the target under the plan's PRIMARY KEY (the source's key changed, and the
    target enforces the old one), in one transaction: every column is kept, rows whose new
    key is incomplete are left out and one row per new key is kept (the re-copy that a key
    change calls for fills the table again and removes what the source no longer has)."""
    key = ", ".join(q(name) for name in primary_key(table))
    complete = " AND ".join(f"{q(name)} IS NOT NULL" for name in primary_key(table))
    old = target_name(table, dialect)
    new_table = f"{table.target_table}__REKEY"
    new = qualified_name((*namespace(table, dialect), new_table))
    return [
        dialect.begin_transaction or "BEGIN TRANSACTION",
        f"DROP TABLE IF EXISTS {new}",
        f"CREATE TABLE {new} AS SELECT * FROM {old} WHERE {complete}\n"
        f"QUALIFY ROW_NUMBER() OVER (PARTITION BY {key}) = 1",
        f"ALTER TABLE {new} ADD PRIMARY KEY ({key})",
        f"DROP TABLE {old}",
        f"ALTER TABLE {new} RENAME TO {q(table.target_table)}",
        "COMMIT",
    ]


def create_log_table(table: TablePlan, dialect: Dialect) -> str:
    """`log_table: true`: the append-only <TARGET>_LOG beside the merged target (no key)."""
    body = ",\n  ".join(
        column_definition(c.target_column, dialect.type_name(c.target_type), c.nullable)
        for c in table.log_columns
    )
    return f"CREATE TABLE IF NOT EXISTS {log_name(table, dialect)} (\n  {body}\n)"


def staging_columns(table: TablePlan) -> list[tuple[str, TargetType]]:
    """(name, type) of every staging column, in the order ``stage_changes`` produces them."""
    internal = list(INTERNAL_STAGE_TYPES)
    if table.mode == "scd2":
        internal += SCD2_STAGE_TYPES
    return [(c.staging_name, c.target_type) for c in table.staged_columns] + internal


def create_staging_table(table: TablePlan, dialect: Dialect, *, replace: bool = False) -> str:
    """``replace``: an existing staging table has an older layout (columns added)."""
    body = ",\n  ".join(
        column_definition(name, dialect.staging_type_name(type_), True)
        for name, type_ in staging_columns(table)
    )
    kind = dialect.staging_kind
    create = f"CREATE OR REPLACE {kind} TABLE" if replace else f"CREATE {kind} TABLE IF NOT EXISTS"
    return f"{create} {staging_name(table, dialect)} (\n  {body}\n)"


def read_columns(name: str) -> str:
    """No rows, only the cursor description: the columns a table has (both drivers)."""
    return f"SELECT * FROM {name} LIMIT 0"
