"""The names every statement uses: the qualified names of a table's target, log and staging
tables (trimmed to what the dialect qualifies with), the state tables' column-name policy,
the aliases of a MERGE's two sides and how items are listed in a statement.

Every identifier goes through ``identifiers.quote_identifier`` (``q``).
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.model import TablePlan

q = quote_identifier
ONE_PER_LINE = ",\n    "  # one item per line: golden-file diffs show exactly what changed
TARGET_ALIAS = "tgt"
SOURCE_ALIAS = "src"


def state_column(table: TablePlan, name: str) -> str:
    """State table column names follow the identifier policy like every target name."""
    return name if table.identifier_case == "upper" else name.lower()


def namespace(table: TablePlan, dialect: Dialect) -> tuple[str, ...]:
    """The target's (database, schema) trimmed to what the dialect qualifies names with:
    a DuckDB file is one database, so DuckDB names carry only the schema."""
    return table.target_namespace[-dialect.namespace_depth :]


def target_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*namespace(table, dialect), table.target_table))


def log_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*namespace(table, dialect), table.log_parts[-1]))


def staging_namespace(table: TablePlan, dialect: Dialect) -> tuple[str, ...]:
    """What qualifies the staging table's name: nothing where staging is a TEMP table (no
    qualified TEMP names in DuckDB), the target's namespace otherwise."""
    return namespace(table, dialect) if dialect.qualified_staging_names else ()


def staging_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*staging_namespace(table, dialect), table.staging_table))


def column_definition(name: str, type_sql: str, nullable: bool) -> str:
    return f"{q(name)} {type_sql}" + ("" if nullable else " NOT NULL")
