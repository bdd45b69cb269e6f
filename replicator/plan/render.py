"""Plan -> the ordered statements a sink runs for a table, in one dialect.

``replicator plan`` prints exactly these; the sinks execute exactly these.
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.plan import statements
from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan


@dataclass(frozen=True)
class Statement:
    purpose: str  # "create schema", "create target", ..., "merge", "record batch"
    sql: str


def table_statements(table: TablePlan, dialect: Dialect) -> list[Statement]:
    """In execution order: setup DDL, then one batch (stage, MERGE, state row)."""
    out = []
    schema = statements.create_schema(table, dialect)
    if schema:
        out.append(Statement("create schema", schema))
    out.append(Statement("create target table", statements.create_target_table(table, dialect)))
    if table.log_table:
        out.append(Statement("create log table", statements.create_log_table(table, dialect)))
    out += [
        Statement("create state table", statements.create_state_table(table, dialect)),
        Statement("create staging table", statements.create_staging_table(table, dialect)),
        Statement("skip a batch already applied", statements.state_lookup(table, dialect)),
        Statement("clear staging", statements.clear_staging(table, dialect)),
    ]
    out += [Statement(purpose, sql) for purpose, sql in statements.batch_statements(table, dialect)]
    out.append(Statement("record the batch", statements.state_insert(table, dialect)))
    return out


def render_sql(table: TablePlan, dialect: Dialect) -> str:
    """One table's statements as a SQL script, each preceded by a comment saying why."""
    parts = [f"-- {table.label} -> {'.'.join(table.target_parts)} ({dialect.name})"]
    if table.routed:
        parts[0] += (
            "\n-- sources: " + ", ".join(table.sources) if table.sources else
            "\n-- sources: every table the patterns match at run time, keyed by _SOURCE_TABLE")
    for statement in table_statements(table, dialect):
        parts.append(f"-- {statement.purpose}\n{statement.sql};")
    return "\n\n".join(parts) + "\n"
