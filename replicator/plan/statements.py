"""One function per statement the sinks run, rendered for one dialect.

Templates, with every identifier through ``identifiers.quote_identifier`` and every value a
bind parameter (``dialect.parameter``): no value ever enters SQL text. The only literals are
replicator's own constants ('d' for a delete, TRUE/FALSE for the soft-delete flag).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from replicator.plan.dialects import Dialect
from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.model import (
    STAGE_CHANGE_SEQ,
    STAGE_OP,
    STAGE_SEQ,
    STAGE_TS,
    STAGE_VALID_TO,
    PlannedColumn,
    TablePlan,
)
from replicator.plan.types import TargetType, integer

q = quote_identifier
_LIST = ",\n    "  # one item per line: golden-file diffs show exactly what changed
TARGET_ALIAS = "tgt"
SOURCE_ALIAS = "src"

# The state table: one row per applied batch; its key makes a replayed batch detectable.
STATE_COLUMNS: tuple[tuple[str, TargetType, bool], ...] = (
    ("PIPELINE", TargetType("string"), False),
    ("TABLE", TargetType("string"), False),
    ("BATCH_ID", integer(19, 64), False),
    ("END_OFFSET", TargetType("string"), True),  # the batch's end offset as JSON text
    ("APPLIED_AT", TargetType("timestamp_tz", fsp=6), False),
)
STATE_KEY = ("PIPELINE", "TABLE", "BATCH_ID")
INTERNAL_STAGE_TYPES: tuple[tuple[str, TargetType], ...] = (
    (STAGE_OP, TargetType("string")),
    (STAGE_SEQ, integer(19, 64)),
    (STAGE_TS, TargetType("timestamp_tz", fsp=6)),
)
SCD2_STAGE_TYPES: tuple[tuple[str, TargetType], ...] = (
    (STAGE_VALID_TO, TargetType("timestamp_tz", fsp=6)),
    (STAGE_CHANGE_SEQ, TargetType("string")),
)


def state_column(table: TablePlan, name: str) -> str:
    """State table column names follow the identifier policy like every target name."""
    return name if table.identifier_case == "upper" else name.lower()


def _namespace(table: TablePlan, dialect: Dialect) -> tuple[str, ...]:
    """The target's (database, schema) trimmed to what the dialect qualifies names with:
    a DuckDB file is one database, so DuckDB names carry only the schema."""
    return table.target_namespace[-dialect.namespace_depth :]


def target_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*_namespace(table, dialect), table.target_table))


def log_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*_namespace(table, dialect), table.log_parts[-1]))


def _state_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*_namespace(table, dialect), table.state_table))


def _column_definition(name: str, type_sql: str, nullable: bool) -> str:
    return f"{q(name)} {type_sql}" + ("" if nullable else " NOT NULL")


def create_schema(table: TablePlan, dialect: Dialect) -> str | None:
    if not dialect.create_schema:
        return None
    return f"CREATE SCHEMA IF NOT EXISTS {qualified_name(_namespace(table, dialect))}"


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
        _column_definition(c.target_column, dialect.type_name(c.target_type), c.nullable)
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
    return sql, (_namespace(table, dialect)[-1], table.target_table, "PRIMARY KEY")


def rekey_target(table: TablePlan, dialect: Dialect) -> list[str]:
    """Rebuild the target under the plan's PRIMARY KEY (the source's key changed, and the
    target enforces the old one), in one transaction: every column is kept, rows whose new
    key is incomplete are left out and one row per new key is kept (the re-copy that a key
    change calls for fills the table again and removes what the source no longer has)."""
    key = ", ".join(q(name) for name in primary_key(table))
    complete = " AND ".join(f"{q(name)} IS NOT NULL" for name in primary_key(table))
    old = target_name(table, dialect)
    new_table = f"{table.target_table}__REKEY"
    new = qualified_name((*_namespace(table, dialect), new_table))
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
        _column_definition(c.target_column, dialect.type_name(c.target_type), c.nullable)
        for c in table.log_columns
    )
    return f"CREATE TABLE IF NOT EXISTS {log_name(table, dialect)} (\n  {body}\n)"


def create_state_table(table: TablePlan, dialect: Dialect) -> str:
    lines = [
        _column_definition(state_column(table, name), dialect.type_name(type_), nullable)
        for name, type_, nullable in STATE_COLUMNS
    ]
    lines.append(f"PRIMARY KEY ({', '.join(q(state_column(table, n)) for n in STATE_KEY)})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {_state_name(table, dialect)} (\n  {body}\n)"


def staging_columns(table: TablePlan) -> list[tuple[str, TargetType]]:
    """(name, type) of every staging column, in the order ``stage_changes`` produces them."""
    internal = list(INTERNAL_STAGE_TYPES)
    if table.mode == "scd2":
        internal += SCD2_STAGE_TYPES
    return [(c.staging_name, c.target_type) for c in table.staged_columns] + internal


def staging_namespace(table: TablePlan, dialect: Dialect) -> tuple[str, ...]:
    """What qualifies the staging table's name: nothing where staging is a TEMP table (no
    qualified TEMP names in DuckDB), the target's namespace otherwise."""
    return _namespace(table, dialect) if dialect.qualified_staging_names else ()


def staging_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*staging_namespace(table, dialect), table.staging_table))


def create_staging_table(table: TablePlan, dialect: Dialect, *, replace: bool = False) -> str:
    """``replace``: an existing staging table has an older layout (columns added)."""
    body = ",\n  ".join(
        _column_definition(name, dialect.staging_type_name(type_), True)
        for name, type_ in staging_columns(table)
    )
    kind = dialect.staging_kind
    create = f"CREATE OR REPLACE {kind} TABLE" if replace else f"CREATE {kind} TABLE IF NOT EXISTS"
    return f"{create} {staging_name(table, dialect)} (\n  {body}\n)"


def read_columns(name: str) -> str:
    """No rows, only the cursor description: the columns a table has (both drivers)."""
    return f"SELECT * FROM {name} LIMIT 0"


# -- loading staging from Parquet files ---------------------------------------------------------


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


def _merge_source_expression(column: PlannedColumn, dialect: Dialect) -> str:
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
    select = [_merge_source_expression(c, dialect) for c in merged]
    select += [q(STAGE_OP), q(STAGE_TS)]
    return (
        f"SELECT\n    {_LIST.join(select)}\n"
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
        f"INSERT INTO {target_name(table, dialect)} (\n    {_LIST.join(q(c) for c in columns)}\n)\n"
        f"SELECT\n    {_LIST.join(values)}\n"
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
        return _LIST.join(f"{prefix}{q(name)} = {value}" for name, value in pairs)

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
        f"    {_LIST.join(q(c) for c in insert_columns)}\n"
        f") VALUES (\n    {_LIST.join(insert_values)}\n)"
    )


def clear_staging(table: TablePlan, dialect: Dialect) -> str:
    return f"DELETE FROM {staging_name(table, dialect)}"


def state_lookup(table: TablePlan, dialect: Dialect) -> str:
    """Is this batch already applied? Parameters: pipeline, table, batch_id."""
    p = dialect.parameter
    where = " AND ".join(f"{q(state_column(table, n))} = {p}" for n in STATE_KEY)
    return f"SELECT 1 FROM {_state_name(table, dialect)} WHERE {where}"


def state_insert(table: TablePlan, dialect: Dialect) -> str:
    """Record an applied batch. Parameters: pipeline, table, batch_id, end_offset (JSON)."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _, _ in STATE_COLUMNS)
    return (
        f"INSERT INTO {_state_name(table, dialect)} ({names}) "
        f"SELECT {p}, {p}, {p}, {p}, {dialect.current_timestamp}"
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
        f"SELECT {c('APPLIED_AT')} FROM {_state_name(table, dialect)} "
        f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p} AND {c('BATCH_ID')} = {p})"
    )


def state_latest(table: TablePlan, dialect: Dialect, count: int = 1) -> str:
    """The newest ``count`` state rows of a table, newest first. Parameters: pipeline, table."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (
        f"SELECT {c('BATCH_ID')}, {c('END_OFFSET')}, {c('APPLIED_AT')} "
        f"FROM {_state_name(table, dialect)} "
        f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p} "
        f"ORDER BY {c('APPLIED_AT')} DESC, {c('BATCH_ID')} DESC LIMIT {int(count)}"
    )


# -- dead letters: rows the target refused (on_error: dead_letter) ---------------------------

DEAD_LETTER_COLUMNS: tuple[tuple[str, TargetType, bool], ...] = (
    ("PIPELINE", TargetType("string"), False),
    ("TABLE", TargetType("string"), False),
    ("BATCH_ID", integer(19, 64), False),
    ("KEY", TargetType("string"), True),  # the row's key as JSON text
    ("COLUMN", TargetType("string"), True),
    ("ERROR", TargetType("string"), False),
    ("BINLOG_FILE", TargetType("string"), True),  # the end of the batch that carried it
    ("BINLOG_POS", integer(19, 64), True),
    ("FAILED_AT", TargetType("timestamp_tz", fsp=6), False),
)


def dead_letter_name(table: TablePlan, dialect: Dialect) -> str:
    return qualified_name((*_namespace(table, dialect), table.dead_letter_table))


def create_dead_letter_table(table: TablePlan, dialect: Dialect) -> str:
    body = ",\n  ".join(
        _column_definition(state_column(table, name), dialect.type_name(type_), nullable)
        for name, type_, nullable in DEAD_LETTER_COLUMNS
    )
    return f"CREATE TABLE IF NOT EXISTS {dead_letter_name(table, dialect)} (\n  {body}\n)"


def dead_letter_insert(table: TablePlan, dialect: Dialect) -> str:
    """One refused row. Parameters: pipeline, table, batch_id, key (JSON), column, error,
    binlog file, binlog pos."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _, _ in DEAD_LETTER_COLUMNS)
    values = ", ".join([p] * (len(DEAD_LETTER_COLUMNS) - 1) + [dialect.current_timestamp])
    return f"INSERT INTO {dead_letter_name(table, dialect)} ({names}) SELECT {values}"


def dead_letter_count(table: TablePlan, dialect: Dialect) -> str:
    """How many rows of a table were set aside. Parameters: pipeline, table."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"SELECT COUNT(*) FROM {dead_letter_name(table, dialect)} "
            f"WHERE {c('PIPELINE')} = {p} AND {c('TABLE')} = {p}")


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
        f"INSERT INTO {into} (\n    {_LIST.join(q(c.target_column) for c in columns)}\n)\n"
        f"SELECT\n    {_LIST.join(_append_value(c, dialect) for c in columns)}\n"
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
    select = [_merge_source_expression(c, dialect) for c in data]
    select += [q(STAGE_OP), q(STAGE_SEQ), q(STAGE_TS), q(STAGE_VALID_TO), q(STAGE_CHANGE_SEQ)]
    key = ", ".join(q(c.staging_name) for c in table.key_columns)
    qualify = (
        f"\n  QUALIFY ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {q(STAGE_SEQ)}) = 1"
        if first_only
        else ""
    )
    return f"SELECT\n    {_LIST.join(select)}\n  FROM {staging_name(table, dialect)}{qualify}"


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
        f"INSERT INTO {target_name(table, dialect)} (\n    {_LIST.join(q(n) for n in names)}\n)\n"
        f"SELECT\n    {_LIST.join(values)}\n"
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
        return _LIST.join(f"{prefix}{q(name)} = {value}" for name, value in pairs)

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


def batch_statements(table: TablePlan, dialect: Dialect, *, fresh: bool = False
                     ) -> list[tuple[str, str]]:
    """(purpose, SQL) of what one batch runs between loading staging and the state row, in
    order, all in the batch's transaction. The first statement of a merged table is its
    MERGE (fakesnow needs the MERGE to open the transaction, see sink/snowflake.py).
    ``fresh``: a snapshot batch of a copy that began with the target empty inserts."""
    if table.mode == "changelog":
        return [("append every change", append_changes(table, dialect))]
    if table.mode == "scd2":
        return [
            ("drop versions already applied", scd2_drop_replayed(table, dialect)),
            ("insert new versions", scd2_insert_versions(table, dialect)),
            ("end or update current versions", scd2_update_current(table, dialect)),
        ]
    out = [("insert the copied rows (the target was empty when the copy began)",
            insert_copied(table, dialect)) if fresh else
           ("merge staged changes", merge(table, dialect))]
    if table.log_table:
        out.append(("append every change to the log table", append_changes(table, dialect, log=True)))
    return out


# -- the lease: one run of a pipeline applies batches (engine.lease) --------------------------

LEASE_COLUMNS: tuple[tuple[str, TargetType], ...] = (
    ("PIPELINE", TargetType("string")),
    ("GENERATION", integer(19, 64)),
    ("HOLDER", TargetType("string")),  # host/pid of the run; "" once released
    ("SINCE", TargetType("timestamp_tz", fsp=6)),
    ("RENEWED_AT", TargetType("timestamp_tz", fsp=6)),
)


def _lease_name(table: TablePlan, dialect: Dialect) -> str:
    suffix = "_LEASE" if table.state_table.upper() == table.state_table else "_lease"
    return qualified_name((*_namespace(table, dialect), table.state_table + suffix))


def create_lease_table(table: TablePlan, dialect: Dialect) -> str:
    lines = [_column_definition(state_column(table, name), dialect.type_name(type_), True)
             for name, type_ in LEASE_COLUMNS]
    lines.append(f"PRIMARY KEY ({q(state_column(table, 'PIPELINE'))})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE IF NOT EXISTS {_lease_name(table, dialect)} (\n  {body}\n)"


def lease_read(table: TablePlan, dialect: Dialect) -> str:
    """generation, holder, since, renewed_at and the target's clock. Parameters: pipeline."""
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"SELECT {c('GENERATION')}, {c('HOLDER')}, {c('SINCE')}, {c('RENEWED_AT')}, "
            f"CURRENT_TIMESTAMP FROM {_lease_name(table, dialect)} "
            f"WHERE {c('PIPELINE')} = {dialect.parameter}")


def lease_insert(table: TablePlan, dialect: Dialect) -> str:
    """The first lease of a pipeline (generation 1). Parameters: pipeline, holder."""
    p = dialect.parameter
    names = ", ".join(q(state_column(table, name)) for name, _ in LEASE_COLUMNS)
    return (f"INSERT INTO {_lease_name(table, dialect)} ({names}) "
            f"VALUES ({p}, 1, {p}, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


def lease_take(table: TablePlan, dialect: Dialect) -> str:
    """Take the lease over: the next generation, if nobody took it since it was read.
    Parameters: holder, pipeline, the generation read."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {_lease_name(table, dialect)} SET {c('GENERATION')} = {c('GENERATION')} + 1, "
            f"{c('HOLDER')} = {p}, {c('SINCE')} = CURRENT_TIMESTAMP, "
            f"{c('RENEWED_AT')} = CURRENT_TIMESTAMP "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")


def lease_renew(table: TablePlan, dialect: Dialect) -> str:
    """The fence: touches the row only while the run's generation holds it (0 rows updated:
    another run took the lease). Inside a batch's transaction it also makes a concurrent take
    wait for the batch's commit. Parameters: pipeline, generation."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {_lease_name(table, dialect)} SET {c('RENEWED_AT')} = CURRENT_TIMESTAMP "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")


def lease_release(table: TablePlan, dialect: Dialect) -> str:
    """A run that ends gives the lease up (the next run takes it at once). Parameters:
    pipeline, generation."""
    p = dialect.parameter
    c = lambda name: q(state_column(table, name))  # noqa: E731
    return (f"UPDATE {_lease_name(table, dialect)} SET {c('HOLDER')} = '' "
            f"WHERE {c('PIPELINE')} = {p} AND {c('GENERATION')} = {p}")
