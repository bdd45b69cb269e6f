"""Pure SQL generation: type mapping, identifier policy, DDL and MERGE per dialect.

``build_plan(pipeline, catalog) -> Plan`` resolves everything once; ``render`` turns a table's
plan into the statements a sink runs. No I/O here.
"""

from replicator.plan.builder import build_plan
from replicator.plan.dialects import DIALECTS, DUCKDB, SNOWFLAKE, Dialect, get_dialect
from replicator.plan.model import Plan, PlannedColumn, TablePlan
from replicator.plan.offline import offline_catalog
from replicator.plan.render import (
    Statement,
    atomic_statements,
    render_atomic_sql,
    render_sql,
    table_statements,
)

__all__ = [
    "DIALECTS",
    "DUCKDB",
    "SNOWFLAKE",
    "Dialect",
    "Plan",
    "PlannedColumn",
    "Statement",
    "TablePlan",
    "atomic_statements",
    "build_plan",
    "get_dialect",
    "offline_catalog",
    "render_atomic_sql",
    "render_sql",
    "table_statements",
]
