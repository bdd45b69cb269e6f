"""Loading a batch into the staging table: from Parquet files in place (DuckDB), through the
staging table's own stage (Snowflake's PUT and COPY INTO), or from the transform step's query;
and clearing staging before the next batch.

Paths are the only literals here (a value never enters SQL text); one with a quote or a
backslash is refused.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan
from replicator.plan.statements.names import q, staging_name, staging_namespace


def staging_stage(table: TablePlan, dialect: Dialect, folder: str = "") -> str:
    """The staging table's own stage (``@"DB"."SCHEMA".%TABLE``), or a folder in it.

    The table name stays unquoted: staging names are plain upper-case identifiers by
    construction (``builder._staging_table_name``), and fakesnow does not parse ``@%"name"``.
    """
    prefix = "".join(q(part) + "." for part in staging_namespace(table, dialect))
    return f"@{prefix}%{table.staging_table}" + (f"/{folder}/" if folder else "")


def _string_literal(text: str) -> str:
    if "'" in text or "\\" in text:
        # A path, never a value; the sink refuses such paths with a hint before this.
        raise ValueError(f"a quote or backslash in {text!r}")
    return f"'{text}'"


def put_file(table: TablePlan, dialect: Dialect, path: str, folder: str) -> str:
    """Upload one local Parquet file into a folder of the staging table's stage, as is
    (Parquet compresses its own pages). https://docs.snowflake.com/en/sql-reference/sql/put"""
    return (f"PUT {_string_literal('file://' + path)} {staging_stage(table, dialect, folder)} "
            "OVERWRITE = TRUE AUTO_COMPRESS = FALSE")


def copy_into_staging(table: TablePlan, dialect: Dialect, folder: str) -> str:
    """COPY the files of one folder of the staging table's stage into staging, by column name.

    The folder is the batch attempt's own (``folder``), so a file an interrupted attempt left
    behind is never loaded. ``USE_LOGICAL_TYPE``: Parquet timestamps and decimals load as
    such; ``BINARY_AS_TEXT = FALSE``: binary columns stay bytes (Snowflake's default reads
    them as UTF-8 text); ``PURGE``: the stage keeps no loaded file; ``FORCE``: files load
    whatever the load history says. https://docs.snowflake.com/en/sql-reference/sql/copy-into-table
    """
    return (
        f"COPY INTO {staging_name(table, dialect)}\n"
        f"  FROM {staging_stage(table, dialect, folder)}\n"
        "  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)\n"
        "  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE\n"
        "  PURGE = TRUE\n"
        "  FORCE = TRUE"
    )


def insert_staging_from_files(table: TablePlan, dialect: Dialect) -> str:
    """Read the batch's Parquet files in place into staging, by column name. Parameter: the
    list of file paths."""
    return (f"INSERT INTO {staging_name(table, dialect)} BY NAME\n"
            f"SELECT * FROM read_parquet({dialect.parameter})")


def insert_staging(table: TablePlan, dialect: Dialect, select: str) -> str:
    """Fill staging, by column name, with the rows of ``select`` (the transform step run by
    the warehouse over a batch's change files: ``program.StagingQuery``)."""
    return f"INSERT INTO {staging_name(table, dialect)} BY NAME\n{select}"


def clear_staging(table: TablePlan, dialect: Dialect) -> str:
    return f"DELETE FROM {staging_name(table, dialect)}"
