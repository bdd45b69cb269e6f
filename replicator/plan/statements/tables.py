"""CREATE of a table's target, log and staging tables (and their schema), the target's PRIMARY
KEY and its rebuild when the source's key changed, and the read of a table's columns that the
setup compares with the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
    """The target's declared PRIMARY KEY columns (``existing_primary_key`` reads the answer),
    and the parameters. Snowflake: SHOW PRIMARY KEYS, a row per column. DuckDB: its catalog,
    the parameters its schema, its table name, the constraint type."""
    if dialect.show_primary_keys:
        return f"SHOW PRIMARY KEYS IN TABLE {target_name(table, dialect)}", ()
    # DuckDB matches names case-blind ("MAIN" is the schema main).
    sql = ("SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = "
           f"lower({dialect.parameter}) AND lower(table_name) = lower({dialect.parameter}) "
           f"AND constraint_type = {dialect.parameter}")
    return sql, (namespace(table, dialect)[-1], table.target_table, "PRIMARY KEY")


def existing_primary_key(rows: Sequence[Sequence[Any]], columns: Sequence[str],
                         dialect: Dialect) -> list[str] | None:
    """The key columns in ``read_primary_key``'s answer (``columns``: its column names), in
    key order; None: the target declares no key."""
    if not rows:
        return None
    if not dialect.show_primary_keys:
        return [str(name) for name in rows[0][0]]
    where = {name.lower(): i for i, name in enumerate(columns)}
    name, sequence = where["column_name"], where["key_sequence"]
    return [str(row[name]) for row in sorted(rows, key=lambda row: int(row[sequence]))]


def rekey_target(table: TablePlan, dialect: Dialect) -> list[str]:
    """Declare the plan's PRIMARY KEY on a target that declares another (the source's key
    changed; the re-copy that a key change calls for fills the table again and removes what
    the source no longer has).

    Where keys are informational (Snowflake), in place: DROP PRIMARY KEY, then ADD PRIMARY
    KEY, on the fully qualified name. No row moves, and the table keeps its grants, Time
    Travel history, streams, clustering and comments (a rebuild and swap would copy every
    row and need COPY GRANTS); each DDL commits, and between the two the table declares no
    key, which nothing enforces anyway.

    Where the target enforces its key (DuckDB, which cannot drop a constraint), the table is
    rebuilt in one transaction: every column is kept, rows whose new key is incomplete are
    left out and one row per new key is kept."""
    key = ", ".join(q(name) for name in primary_key(table))
    old = target_name(table, dialect)
    if not dialect.enforces_primary_key:
        return [f"ALTER TABLE {old} DROP PRIMARY KEY",
                f"ALTER TABLE {old} ADD PRIMARY KEY ({key})"]
    complete = " AND ".join(f"{q(name)} IS NOT NULL" for name in primary_key(table))
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
    """(name, type) of every staging column, in the order ``transform.stage_batch`` produces them."""
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
