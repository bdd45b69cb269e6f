"""The same canonical text of a row, computed inside MySQL and inside the warehouse.

A key range is compared by two numbers per side: its row count and the sum of a 64-bit slice
of each row's MD5 (reladiff's and data-diff's checksum). That only works if both databases
hash byte for byte the same text for the same row, so each compared column is turned into
canonical text *in SQL* on each side, from the plan (the column's MySQL type and target
type, which say what replication wrote):

=========================  =================================  ==============================
target kind (MySQL type)   canonical text                      why this form
=========================  =================================  ==============================
integer                    decimal digits ``-123``             one spelling everywhere
decimal(p,s)               digits with exactly ``s`` decimals  MySQL, DuckDB and Snowflake all
                                                               print a DECIMAL at its scale
timestamp (DATETIME)       microseconds since 1970-01-01       no text format to agree on;
timestamp_tz (TIMESTAMP)   microseconds since the epoch (UTC)  the MySQL session is UTC
date                       days since 1970-01-01               (zero dates: NULL, as loaded)
boolean (BIT(1),           ``1`` / ``0``                       any non-zero TINYINT(1) is
TINYINT(1))                                                    TRUE once replicated
binary, BIT(n>1)           upper-case hex of the bytes         BIT(n) left-padded to
                                                               ceil(n/8) bytes (big-endian)
time_text (TIME)           MySQL's own text ``-838:59:59.0``   the target holds that text
string (CHAR, VARCHAR,     ``<characters>:<text>`` in UTF-8    the length prefix keeps a
TEXT, ENUM, SET, ...)                                          ``|`` inside a value from
                                                               faking a column boundary
NULL                       ``N``                               never a text of the above
                                                               (``''`` is ``0:``, 'None'
                                                               ``4:None``)
=========================  =================================  ==============================

A row's text is its columns' texts joined by ``|``; its hash is the low 64 bits of its MD5
as an unsigned integer (MySQL ``CONV(SUBSTRING(MD5(t), 17, 16), 16, 10)``, DuckDB
``('0x' || substr(md5(t), 17, 16))::UBIGINT``, Snowflake ``MD5_NUMBER_LOWER64(t)``); a range's
checksum is their exact SUM (DECIMAL in MySQL, HUGEINT in DuckDB, NUMBER(38) in Snowflake),
so it is independent of row order and a changed, missing or extra row changes it.

Not pushed down (the table is then compared by fetching its rows, as before, and the report
says so): FLOAT/DOUBLE (each side prints a double its own way), JSON (MariaDB keeps the
text as written, the warehouses re-serialise it), masked and computed columns (their value
is made by the transform step), a declared ``type:``, a row filter, routed targets,
changelog tables, and tables whose key does not start with an integer column (ranges are
cut by integer arithmetic on it).

SQL is built here as text from identifiers (quoted by each side's one quoting function)
and fixed templates; values (range bounds) are always bind parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.source.snapshot import quote_mysql_identifier

# Canonical forms (see the table above); each dialect has one template per form.
INTEGER, DECIMAL, MICROS, DAYS, BOOLEAN, HEX, BIT_HEX, TEXT, STRING = (
    "integer", "decimal", "micros", "days", "boolean", "hex", "bit_hex", "text", "string")

INTEGER_MYSQL = frozenset({"tinyint", "smallint", "mediumint", "int", "bigint", "year"})
STRING_MYSQL = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext",
                          "enum", "set"})
BINARY_MYSQL = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob",
                          "longblob"})
MICROS_MYSQL = frozenset({"datetime", "timestamp"})


@dataclass(frozen=True)
class HashDialect:
    """One side's SQL for the canonical text, the row hash and the range aggregate.

    Templates take ``{}`` (a column expression); ``row_hash`` the joined row text;
    ``bucket`` the key expression and two parameters (the range's lower bound, the bucket
    width), and must give the same integer on both sides for integer keys."""

    name: str
    quote: Callable[[str], str]
    parameter: str
    forms: dict[str, str]
    length_prefixed: str  # {} is the UTF-8 text; NULL must stay NULL
    text_of_string: str  # a character column as UTF-8 text
    join: str  # {} is the comma-separated column texts
    row_hash: str
    bucket: str
    total: str = "SUM({})"  # the range's checksum: an exact sum of the row hashes


MYSQL = HashDialect(
    name="mysql",
    quote=quote_mysql_identifier,
    parameter="%s",
    forms={
        INTEGER: "CAST(CAST({} AS SIGNED) AS CHAR)",
        DECIMAL: "CAST({} AS CHAR)",
        # In a UTC session (SourceReader), so TIMESTAMP columns are instants.
        MICROS: "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {}) AS CHAR)",
        DAYS: "CAST(DATEDIFF({}, '1970-01-01') AS CHAR)",  # a zero date gives NULL
        BOOLEAN: "IF({} <> 0, '1', '0')",
        HEX: "HEX({})",
        BIT_HEX: "LPAD(HEX({}), {width}, '0')",
        TEXT: "CAST({} AS CHAR)",
    },
    length_prefixed="CONCAT(CHAR_LENGTH({0}), ':', {0})",
    text_of_string="CONVERT({} USING utf8mb4)",
    join="CONCAT_WS('|', {})",
    row_hash="CAST(CONV(SUBSTRING(MD5({}), 17, 16), 16, 10) AS UNSIGNED)",
    # DECIMAL: a BIGINT key minus a bound below it can leave BIGINT's range.
    bucket="((CAST({} AS DECIMAL(21,0)) - %s) DIV %s)",
)

DUCKDB = HashDialect(
    name="duckdb",
    quote=quote_identifier,
    parameter="?",
    forms={
        INTEGER: "CAST({} AS VARCHAR)",
        DECIMAL: "CAST({} AS VARCHAR)",
        MICROS: "CAST(epoch_us({}) AS VARCHAR)",
        DAYS: "CAST(date_diff('day', DATE '1970-01-01', {}) AS VARCHAR)",
        BOOLEAN: "CASE WHEN {} THEN '1' ELSE '0' END",
        HEX: "hex({})",
        BIT_HEX: "hex({})",
        TEXT: "CAST({} AS VARCHAR)",
    },
    length_prefixed="(CAST(length({0}) AS VARCHAR) || ':' || {0})",
    text_of_string="{}",
    join="concat_ws('|', {})",
    row_hash="CAST(('0x' || substr(md5({}), 17, 16)) AS UBIGINT)",
    bucket="((CAST({} AS HUGEINT) - CAST(? AS HUGEINT)) // CAST(? AS HUGEINT))",
)

# https://docs.snowflake.com/en/sql-reference/functions/md5_number_lower64 (the low 64 bits
# of the MD5 read as a big-endian number: the last 16 hex digits, as MySQL's CONV reads).
SNOWFLAKE = HashDialect(
    name="snowflake",
    quote=quote_identifier,
    parameter="?",
    forms={
        INTEGER: "TO_VARCHAR({})",
        DECIMAL: "TO_VARCHAR({})",
        MICROS: "TO_VARCHAR(DATE_PART(EPOCH_MICROSECOND, {}))",
        DAYS: "TO_VARCHAR(DATEDIFF(day, TO_DATE('1970-01-01'), {}))",
        BOOLEAN: "IFF({}, '1', '0')",
        HEX: "HEX_ENCODE({})",
        BIT_HEX: "HEX_ENCODE({})",
        TEXT: "TO_VARCHAR({})",
    },
    length_prefixed="(TO_VARCHAR(LENGTH({0})) || ':' || {0})",
    text_of_string="{}",
    join="CONCAT_WS('|', {})",
    # Typed, so that no translator (fakesnow's sqlglot) sums it as a DOUBLE.
    row_hash="CAST(MD5_NUMBER_LOWER64({}) AS NUMBER(20,0))",
    bucket="FLOOR(({} - ?) / ?)",
)

TARGET_DIALECTS = {"duckdb": DUCKDB, "snowflake": SNOWFLAKE}


@dataclass(frozen=True)
class CanonicalColumn:
    """How one compared column becomes text: its form, and the BIT width (hex digits)."""

    column: PlannedColumn
    form: str
    width: int | None = None

    def text(self, dialect: HashDialect, expression: str) -> str:
        if self.form == STRING:
            value = dialect.text_of_string.format(expression)
            text = dialect.length_prefixed.format(value)
        else:
            text = dialect.forms[self.form].format(expression, width=self.width)
        return f"COALESCE({text}, 'N')"


def canonical_form(column: PlannedColumn) -> CanonicalColumn | str:
    """The column's canonical form, or why it cannot be computed alike on both sides."""
    name = column.target_column
    mysql = column.mysql_type
    if column.mask:
        return f"{name} is masked (mask: {column.mask}), a value the transform step makes"
    if column.expression is not None or mysql is None:
        return f"{name} is computed by the transform step"
    if column.declared_type:
        return f"{name} has a declared type:, converted by the transform step"
    kind, source = column.target_type.kind, mysql.name
    if kind == "integer" and source in INTEGER_MYSQL:
        return CanonicalColumn(column, INTEGER)
    if kind == "decimal" and (source == "decimal" or (source == "bigint" and mysql.unsigned)):
        return CanonicalColumn(column, DECIMAL)
    if kind == "string" and source == "decimal":  # DECIMAL(p > 38): every digit as text
        return CanonicalColumn(column, TEXT)
    if kind in ("timestamp", "timestamp_tz") and source in MICROS_MYSQL:
        return CanonicalColumn(column, MICROS)
    if kind == "date" and source == "date":
        return CanonicalColumn(column, DAYS)
    if kind == "boolean" and source in ("tinyint", "bit"):
        return CanonicalColumn(column, BOOLEAN)
    if kind == "binary" and source in BINARY_MYSQL:
        return CanonicalColumn(column, HEX)
    if kind == "binary" and source == "bit":
        return CanonicalColumn(column, BIT_HEX, width=2 * (((mysql.length or 1) + 7) // 8))
    if kind == "time_text" and source == "time":
        return CanonicalColumn(column, TEXT)
    if kind == "string" and source in STRING_MYSQL:
        return CanonicalColumn(column, STRING)
    if kind == "float":
        return (f"{name} is {source.upper()}: MySQL and the warehouse print a double "
                "differently")
    if kind == "json":
        return f"{name} is JSON: the warehouse re-serialises it, MySQL keeps its own text"
    return f"{name}: {source.upper()} -> {kind} has no canonical text in SQL on both sides"


@dataclass(frozen=True)
class ChecksumPlan:
    """One table's range-checksum queries, both sides (built once, run per range)."""

    key_source: str  # the leading key column, MySQL spelling (ranges are cut on it)
    key_target: str
    columns: tuple[CanonicalColumn, ...]
    source_text: str  # a row's canonical text, MySQL expression
    target_text: str  # the same, in the warehouse's SQL
    source_sql: str  # params: lower, width (bucket), lower, upper (range)
    target_sql: str  # params: lower, width, lower, upper


def row_text(dialect: HashDialect, columns: Sequence[CanonicalColumn],
             names: Sequence[str]) -> str:
    """A row's canonical text: its columns' texts joined by ``|``."""
    texts = ", ".join(c.text(dialect, dialect.quote(n)) for c, n in zip(columns, names,
                                                                          strict=True))
    return dialect.join.format(texts)


def _range_sql(dialect: HashDialect, relation: str, key: str, text: str,
               where: Sequence[str]) -> str:
    quoted = dialect.quote(key)
    bucket = dialect.bucket.format(quoted)
    mark = dialect.parameter
    conditions = " AND ".join([*where, f"{quoted} >= {mark}", f"{quoted} < {mark}"])
    total = dialect.total.format(dialect.row_hash.format(text))
    return (f"SELECT {bucket} AS bucket, COUNT(*), {total} "
            f"FROM {relation} WHERE {conditions} GROUP BY 1")


def integer_key(table: TablePlan) -> PlannedColumn | str:
    """The key column ranges are cut on, or why there is none."""
    if not table.key_columns:
        return "no primary key"
    first = table.key_columns[0]
    mysql = first.mysql_type
    integral = first.target_type.kind == "integer" or (
        first.target_type.kind == "decimal" and not first.target_type.scale)
    if (first.mask or first.expression is not None or mysql is None or not integral
            or mysql.name not in INTEGER_MYSQL - {"year"}):
        return (f"its key starts with {first.target_column}, not an integer column "
                "(ranges are cut by integer arithmetic on the key)")
    return first


def checksum_plan(table: TablePlan, source_relation: str, target_kind: str,
                  live: Sequence[str] = (), source_where: Sequence[str] = ()
                  ) -> ChecksumPlan | list[str]:
    """The table's checksum queries, or every reason it must be compared by fetching rows.

    ``source_relation``: the MySQL table, quoted; ``live``: target conditions that select
    the live rows (not soft-deleted, SCD2's current versions) and the slice, without
    parameters; ``source_where``: the slice's MySQL condition (``verify --where``)."""
    reasons: list[str] = []
    if table.routed:
        reasons.append("a routed target (rows of several source tables)")
    if table.mode == "changelog":
        reasons.append("a changelog target (the latest change per key is ranked in SQL)")
    if table.filter:
        reasons.append("a row filter (the transform step decides it)")
    dialect = TARGET_DIALECTS.get(target_kind)
    if dialect is None:
        reasons.append(f"no checksum SQL for a {target_kind} target")
    key = integer_key(table)
    if isinstance(key, str):
        reasons.append(key)
    forms = [canonical_form(c) for c in table.data_columns]
    reasons += [f for f in forms if isinstance(f, str)]
    if reasons or dialect is None or isinstance(key, str):
        return reasons
    columns = tuple(f for f in forms if not isinstance(f, str))
    source_names = [c.column.source_column or "" for c in columns]
    target_names = [c.column.target_column for c in columns]
    assert key.source_column is not None
    source_text = row_text(MYSQL, columns, source_names)
    target_text = row_text(dialect, columns, target_names)
    return ChecksumPlan(
        key_source=key.source_column,
        key_target=key.target_column,
        columns=columns,
        source_text=source_text,
        target_text=target_text,
        source_sql=_range_sql(MYSQL, source_relation, key.source_column, source_text,
                              source_where),
        target_sql=_range_sql(dialect, qualified_name(table.target_parts), key.target_column,
                              target_text, live),
    )
