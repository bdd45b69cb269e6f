"""A batch's change files COPYed from the user's stage, and the transform step as Snowflake
SQL over them (``target.snowflake.stage``).

The executors write the change files (``engine.landing``): to an object store the stage (an
external one) points at, or to a local path, each task then PUTting its files into the
stage (an internal one: ``put_landed``, ``engine.job.stage_put``) under the same relative names.
Per batch and table, inside the batch program:

1. ``CREATE OR REPLACE TRANSIENT TABLE`` the table's raw table (``_REPLICATOR_RAW_<TABLE>``):
   the change files' columns (the row image, its before-image, ``model.change_batch``'s
   internal columns), each data column typed as its staging column, so the COPY converts a
   Parquet value exactly as it converts the driver's staged Parquet today. Replacing it
   empties it and gives it the plan's current layout (a column added mid-stream).
2. ``COPY INTO`` it ``FROM @stage FILES = (...)``: exactly the batch's files, by name
   (relative to the stage's location), by column name (a file written before a column was
   added loads NULL for it), at most 1000 names per statement (Snowflake's limit).
3. ``INSERT INTO`` the staging table the transform step over the raw rows: the one
   statement DuckDB runs over a batch (``transform.stage.statement``: key moves, the last
   change per key or every change, scd2 versions, metadata, ``STAGE_SEQ``), rendered for
   Snowflake (``transform.stage.external_staging``) with this module's ``raw_value`` as
   the staged value of a source column.

Then the batch's MERGE, state row and COMMIT run as for every batch (``program.batch_tail``).

Exactly once: the raw table and the state row decide. The raw table is re-created at every
attempt, so it holds that attempt's COPY only, each file once; the MERGE and the state row
commit together, and the lookup at the head of the batch skips a batch whose state row
exists. Snowflake's load history belongs to a table, and a re-created table has none, so a
replayed batch loads its files again whatever ``FORCE`` says
(https://docs.snowflake.com/en/user-guide/data-load-considerations-load#load-metadata).
``FORCE = TRUE`` is kept so the COPY never depends on that history (docs/snowflake.md).

What this load does not do yet is refused by the plan (``refusals``), naming the setting:
filters and computed columns with no exact Snowflake form (``stage_expressions``), masks
of other than text columns,
outbox routes, dead letters, and columns whose staged value needs a conversion beyond
Snowflake's own cast of the Parquet value (a BIT into BINARY, a TIME into a number, ...).
Refused means the stage's road only: the driver stages such a table's batches, as without a
stage (``plan.stage_roads``; the plan's warning R312).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replicator.model import change_batch as cb
from replicator.plan.dialects import Dialect
from replicator.plan.identifiers import qualified_name
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.statements import stage_expressions
from replicator.plan.statements.names import q, staging_name, staging_namespace
from replicator.plan.statements.tables import staging_columns

RAW_PREFIX = "_REPLICATOR_RAW_"
# Snowflake's limit on the names in one COPY's FILES list.
MAX_FILES_PER_COPY = 1000
# Shown by `plan` where the batch's file names go.
FILES_PLACEHOLDER = "<each change file of the batch, relative to the stage>"

# Metadata target column (before identifier folding) -> the change-file column holding it.
METADATA_SOURCES = {
    "_TS_MS": cb.TS_MS,
    "_BINLOG_FILE": cb.FILE,
    "_BINLOG_POS": cb.POS,
    "_TRANSACTION_ID": cb.TRANSACTION_ID,
    "_TRANSACTION_ORDER": cb.ROW_INDEX,
    "_SOURCE_TABLE": cb.TABLE,
}
_INTERNAL_TYPES = {
    cb.OP: "VARCHAR", cb.FILE: "VARCHAR", cb.FILE_SEQ: "NUMBER(19,0)",
    cb.POS: "NUMBER(19,0)", cb.ROW_INDEX: "NUMBER(19,0)", cb.TS_MS: "NUMBER(19,0)",
    cb.GTID: "VARCHAR", cb.TRANSACTION_ID: "VARCHAR", cb.TABLE: "VARCHAR",
}

# MySQL type name -> the target kinds its change-file value reaches by Snowflake's own cast
# of the Parquet value (``source.arrow_types`` gives the file's type), exactly as the
# transform step converts it (``transform.columns.convert``): integers stay numbers (a
# TINYINT(1) as BOOLEAN: non-zero is TRUE), text stays text, instants stay instants.
_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit"}
_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
         "json", "uuid", "inet4", "inet6", "time"}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry",
          "point", "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
          "geometrycollection"}
_TEXT_KINDS = {"string", "time_text", "json"}


def raw_name(table: TablePlan, dialect: Dialect) -> str:
    """The table's raw table: beside its staging table, named after it."""
    suffix = table.staging_table.split("_REPLICATOR_STAGE_", 1)[-1]
    return qualified_name((*staging_namespace(table, dialect), RAW_PREFIX + suffix))


def _data_columns(table: TablePlan) -> list[PlannedColumn]:
    """The staged columns read from a source column, one per source column."""
    seen: dict[str, PlannedColumn] = {}
    for column in table.staged_columns:
        if column.role == "data" and column.source_column and column.source_column not in seen \
                and column.mysql_type is not None:  # not a routed table's _SOURCE_TABLE
            seen[column.source_column] = column
    return list(seen.values())


def _raw_type(column: PlannedColumn, dialect: Dialect) -> str:
    """A masked column's raw value is the unmasked text (a declared ``type: VARCHAR(64)``
    holds the hash, not the value); every other column's is typed as staged."""
    if column.mask is not None:
        return dialect.type_names["string"]
    return dialect.staging_type_name(column.target_type)


def raw_columns(table: TablePlan, dialect: Dialect) -> list[tuple[str, str]]:
    """(column, Snowflake type) of the raw table: the row image and its before-image, typed
    as staged (JSON as text), then the change files' internal columns."""
    image = [(c.source_column or "", _raw_type(c, dialect)) for c in _data_columns(table)]
    before = [(cb.before_column(name), type_sql) for name, type_sql in image]
    return [*image, *before, *_INTERNAL_TYPES.items()]


def create_raw_table(table: TablePlan, dialect: Dialect) -> str:
    body = ",\n  ".join(f"{q(name)} {type_sql}" for name, type_sql in raw_columns(table, dialect))
    return f"CREATE OR REPLACE TRANSIENT TABLE {raw_name(table, dialect)} (\n  {body}\n)"


def _file_literal(name: str) -> str:
    if "'" in name or "\\" in name:
        # A file name, never a value; the landing zone's names have neither.
        raise ValueError(f"a quote or backslash in {name!r}")
    return f"'{name}'"


def copy_into_raw(table: TablePlan, dialect: Dialect, files: Sequence[str] | None
                  ) -> list[str]:
    """COPY the named files (relative to the stage's location) into the raw table, by column
    name: one statement per ``MAX_FILES_PER_COPY`` names; ``files=None``: `plan`'s
    placeholder. ``USE_LOGICAL_TYPE``: Parquet timestamps and decimals load as such;
    ``BINARY_AS_TEXT = FALSE``: bytes stay bytes; ``FORCE``: the load history does not
    decide (the module's docstring says why); no ``PURGE``: the files are the landing
    zone's (``engine.landing_retention`` removes them).
    https://docs.snowflake.com/en/sql-reference/sql/copy-into-table"""
    assert dialect.external_stage is not None
    groups: list[Sequence[str]]
    if files is None:
        groups = [[FILES_PLACEHOLDER]]
    else:
        groups = [files[i:i + MAX_FILES_PER_COPY]
                  for i in range(0, len(files), MAX_FILES_PER_COPY)]
    return [
        f"COPY INTO {raw_name(table, dialect)}\n"
        f"  FROM @{dialect.external_stage}\n"
        f"  FILES = ({', '.join(_file_literal(name) for name in group)})\n"
        "  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)\n"
        "  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE\n"
        "  FORCE = TRUE"
        for group in groups
    ]


def raw_value(column: PlannedColumn, dialect: Dialect, bind: Callable[[object], str]) -> str:
    """A data column's staged value from its raw column (typed as staged: ``refusals`` left
    only columns whose value Snowflake's cast of the Parquet value makes; a TINYINT(1) as
    BOOLEAN is non-zero), then masked as ``transform.columns.staged_value`` masks a text
    value (``bind``: a mask's salt is a bind parameter). The transform step's
    ``source_value`` on this path."""
    source = q(column.source_column or "")
    if column.mysql_type is None:  # a routed table's _SOURCE_TABLE: the split step adds it
        return source
    if column.target_type.kind == "boolean" and column.mysql_type.name in _INTEGERS:
        return f"({source} <> 0)"
    value = f"CAST({source} AS {_raw_type(column, dialect)})"
    if column.mask is None:
        return value
    # Only text and integers reach here (``_masks``): the raw VARCHAR is the text form.
    # Snowflake's LENGTH, SUBSTR and RIGHT count characters, as DuckDB's do; SHA2 and MD5
    # hash the UTF-8 bytes and return lower-case hex, as DuckDB's sha256 and md5.
    if column.mask == "null":
        return "NULL"
    if column.mask == "truncate":
        return f"SUBSTR({value}, 1, {column.mask_length or 0})"
    if column.mask == "redact":
        if not column.mask_keep_last:
            return f"CASE WHEN {source} IS NOT NULL THEN '***' END"
        keep = column.mask_keep_last
        return (f"CASE WHEN LENGTH({value}) <= {keep} THEN REPEAT('*', LENGTH({value})) "
                f"ELSE REPEAT('*', LENGTH({value}) - {keep}) || RIGHT({value}, {keep}) END")
    if column.mask_salt:
        value = f"(CAST({bind(column.mask_salt)} AS VARCHAR) || {value})"
    return f"SHA2({value}, 256)" if column.mask == "sha256" else f"MD5({value})"


def insert_staging(table: TablePlan, dialect: Dialect, select: str) -> str:
    """Staging from ``select`` (the transform step rendered for Snowflake over the raw
    table: ``transform.stage.external_staging``), its columns taken by name: Snowflake's
    INSERT matches by position only."""
    columns = ", ".join(q(name) for name, _ in staging_columns(table))
    return (f"INSERT INTO {staging_name(table, dialect)} ({columns})\n"
            f"SELECT {columns} FROM (\n{select}\n) AS staged")


def _reaches(column: PlannedColumn) -> bool:
    """Whether Snowflake's cast of the column's change-file value is its staged value."""
    mysql, goal = column.mysql_type, column.target_type
    if mysql is None:
        return False
    name = mysql.name
    if name in _INTEGERS:
        if name == "bit":
            return goal.kind == "integer"
        return goal.kind in ("integer", "decimal", "boolean")
    if name in ("decimal", "numeric", "dec", "fixed"):
        # Only widening: Snowflake rounds half away from zero, the transform step half even.
        return (goal.kind == "decimal" and (mysql.precision or 10) <= 38
                and (goal.scale or 0) >= (mysql.scale or 0))
    if name in ("float", "double", "real", "double precision"):
        return goal.kind == "float"
    if name in _TEXT:
        return goal.kind in _TEXT_KINDS
    if name in _BYTES:
        return goal.kind == "binary"
    return (name, goal.kind) in {("date", "date"), ("datetime", "timestamp"),
                                 ("timestamp", "timestamp_tz"), ("bool", "boolean"),
                                 ("boolean", "boolean")}


def _masks(column: PlannedColumn) -> bool:
    """Whether ``raw_value`` masks the column as ``transform.columns.staged_value`` does:
    a text column into text (its text form is itself); an integer column by a hash or
    redaction of its digits (the raw column is VARCHAR: Snowflake's cast of the Parquet
    integer is its digits, as DuckDB's ``text_form`` prints it); ``null`` for any column
    but bytes (the value is never read). Other kinds print by DuckDB's ``text_form``
    (dates, decimals, doubles, TIME), not rendered for Snowflake."""
    mysql = column.mysql_type
    if mysql is None or column.target_type.kind != "string":
        return False
    if column.mask == "null":
        return mysql.name not in _BYTES
    if mysql.name in _INTEGERS - {"bit", "year"}:
        return column.mask in ("redact", "sha256", "md5")
    return (mysql.name in _TEXT and mysql.name != "time"
            and column.mask in ("truncate", "redact", "sha256", "md5"))


def refusals(table: TablePlan) -> list[tuple[str, str]]:
    """(what, the setting) the external-stage load cannot do for this table yet; empty: it
    can. Any: the driver stages the table's batches (``plan.stage_roads``)."""
    out = []
    if table.outbox is not None:
        out.append(("an outbox route", "outbox"))
    out += stage_expressions.refusals(table)
    if table.on_error == "dead_letter":
        out.append(("on_error: dead_letter", "on_error"))
    if not table.source_key:
        out.append(("a table without a key", "key"))
    for column in table.staged_columns:
        if column.role == "data" and column.mysql_type is None and table.routed:
            continue  # _SOURCE_TABLE: the change's table name (``raw_value``)
        if column.role != "data":
            if column.target_column.upper() not in (*METADATA_SOURCES, "_OP", "_DELETED"):
                out.append((f"metadata column {column.target_column}", "metadata"))
            continue
        if column.expression is not None:
            continue  # stage_expressions
        if column.mask is not None:
            if not _masks(column):
                out.append((f"a mask on {column.target_column}", "columns"))
        elif not _reaches(column):
            mysql = column.mysql_type.name if column.mysql_type else "?"
            out.append((f"column {column.source_column} ({mysql} as "
                        f"{column.target_type.describe()})", "columns"))
    return out


def put_landed(stage: str, landing: str, path: str | None = None, local: str | None = None
               ) -> str:
    """The executor's upload of a landed file into ``stage`` under the same name relative to
    it as relative to the landing root (so the driver's COPY names it as it would on an
    object store); ``local``: the file to upload, when it is not yet at ``path`` (the same
    base name in another folder); ``path=None``: `plan`'s placeholder. As is: Parquet
    compresses its own pages. https://docs.snowflake.com/en/sql-reference/sql/put"""
    if path is None:
        local, folder = "<each file the task landed>", "<its folder under engine.landing>"
    else:
        relative = stage_relative(path, landing)
        local = (local or path).removeprefix("file://")
        folder = relative.rsplit("/", 1)[0] if "/" in relative else ""
    return (f"PUT {_file_literal('file://' + local)} @{stage}/{folder}/ "
            "OVERWRITE = TRUE AUTO_COMPRESS = FALSE")


def stage_relative(path: str, landing: str) -> str:
    """A landed file's name relative to the landing root the stage points at. Landed paths
    come with or without the URI's scheme (pyarrow's file system paths drop it)."""
    root = landing.split("?", 1)[0].rstrip("/")
    root = root.split("://", 1)[-1]
    inner = path.split("://", 1)[-1]
    if not inner.startswith(root + "/"):
        raise ValueError(f"{path} is not under {landing}")
    return inner[len(root) + 1:]


__all__ = [
    "FILES_PLACEHOLDER",
    "MAX_FILES_PER_COPY",
    "METADATA_SOURCES",
    "RAW_PREFIX",
    "copy_into_raw",
    "create_raw_table",
    "insert_staging",
    "put_landed",
    "raw_columns",
    "raw_name",
    "raw_value",
    "refusals",
    "stage_relative",
]
