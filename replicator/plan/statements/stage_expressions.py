"""A table's row filter and computed columns (Spark SQL) as Snowflake SQL over the external
stage's raw table (``target.snowflake.stage``), with Spark's values and failures
(``plan.transpile.snowflake``); what has no exact form is refused (R311, ``refusals``).

The transform step reads the expressions' source columns from the raw table, typed as
staged (``stage_copy.raw_columns``). A column is read as its Spark type only where the raw
value is the value Spark sees, so the expression starts from the same inputs:

- integers (an integer type, not BIT or YEAR) and DECIMALs kept as numbers: a NUMBER of the
  staged precision, cast to the NUMBER of the Spark type (the value fits: the staging type
  holds it);
- TINYINT(1) read as BOOLEAN and kept as BOOLEAN (non-zero is TRUE on both sides);
- FLOAT/DOUBLE kept as FLOAT (a float32 widens to a double exactly);
- VARCHAR/TEXT kept as text (not CHAR, ENUM, SET, JSON, TIME: their text forms are the
  transform step's, not the raw value), unmasked: a masked column's raw value is the text
  before the mask, and that is what the filter and computed columns read on the driver too;
- DATE kept as DATE; DATETIME kept as TIMESTAMP_NTZ (Spark's timestamp in UTC). A MySQL
  TIMESTAMP (an instant, TIMESTAMP_TZ) is not read.

A computed column's value is then staged by a CAST to its declared type, only where that
CAST keeps the value (a number into at least its digits and scale, text into VARCHAR without
a length, a date, timestamp, boolean or double into its own kind) and it has no mask.
"""

from __future__ import annotations

from replicator.errors import ReplicatorError
from replicator.plan.dialects import Dialect
from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.statements.names import q
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.snowflake import translate_snowflake
from replicator.plan.transpile.snowflake_casts import snowflake_type

_TEXTS = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_INTEGER_DIGITS = {"int": 10, "bigint": 19}


def _readable(column: PlannedColumn, spark: SparkType) -> bool:
    """Whether the raw column holds the value Spark reads (the module's docstring)."""
    mysql, goal = column.mysql_type, column.target_type
    if mysql is None:
        return False
    name = mysql.name
    if spark.kind in ("int", "bigint", "decimal"):
        return name in _INTEGERS | {"decimal"} and goal.kind in ("integer", "decimal")
    if spark.kind == "boolean":
        return name == "tinyint" and goal.kind == "boolean"
    if spark.kind == "double":
        return name in ("float", "double") and goal.kind == "float"
    if spark.kind == "string":
        return name in _TEXTS and goal.kind == "string"
    if spark.kind == "date":
        return name == "date" and goal.kind == "date"
    if spark.kind == "timestamp":
        return name == "datetime" and goal.kind == "timestamp"
    return False


def _columns(table: TablePlan):
    """Source column (lower case) -> its raw column, for columns the raw table holds."""
    found: dict[str, PlannedColumn] = {}
    for column in table.data_columns:
        name = (column.source_column or "").lower()
        if name and column.mysql_type is not None and column.expression is None:
            found.setdefault(name, column)
    return found


def _translate(table: TablePlan, text: str, inputs: dict[str, SparkType]) -> tuple[str, SparkType]:
    """``text`` as Snowflake SQL over the raw table; Untranslatable names what stops it."""
    raw = _columns(table)

    def column_sql(name: str) -> str:
        column = raw.get(name.lower())
        if column is None:
            raise Untranslatable(f"column {name} is not copied to the target, so the raw table "
                                 "does not hold it")
        spark = inputs[name]
        if not _readable(column, spark):
            mysql = column.mysql_type.name if column.mysql_type else "?"
            raise Untranslatable(f"column {name} ({mysql} as {column.target_type.describe()}"
                                 f"{', masked' if column.mask else ''}) is not read as Spark's {spark}")
        value = q(column.source_column or "")
        if spark.kind in ("int", "bigint", "decimal"):
            return f"CAST({value} AS {snowflake_type(spark)})"
        return value

    return translate_snowflake(text, inputs, column_sql)


def filter_sql(table: TablePlan) -> str | None:
    """The table's filter as Snowflake SQL over its raw table, or None: no exact form
    (``refusals`` says why)."""
    if not table.filter:
        return None
    try:
        return _translate(table, table.filter, dict(table.filter_inputs))[0]
    except ReplicatorError:
        return None


def computed_sql(column: PlannedColumn, table: TablePlan) -> str:
    """A computed column's value (the Snowflake form of its Spark type) over the raw table;
    only for a table ``refusals`` accepts."""
    assert column.expression is not None
    return _translate(table, column.expression, dict(column.expression_inputs))[0]


def describe(table: TablePlan) -> list[str]:
    """``replicator plan``'s view of the Snowflake SQL of the table's filter and computed
    columns (what the staging INSERT runs), beside DuckDB's (``describe_transforms``)."""
    lines = []
    if table.filter and not refusals(table):
        lines.append(f"filter in Snowflake -> {filter_sql(table)}")
    if not refusals(table):
        lines += [f"{column.target_column} in Snowflake -> {computed_sql(column, table)}"
                  for column in table.computed_columns]
    return lines


def computed_value(column: PlannedColumn, value: str, dialect: Dialect) -> str:
    """The staged value of a computed column whose value is ``value``: its declared type."""
    return f"CAST({value} AS {dialect.staging_type_name(column.target_type)})"


def _keeps(result: SparkType, column: PlannedColumn) -> bool:
    """Whether a CAST of the Spark value to the column's declared type keeps it."""
    goal = column.target_type
    if column.mask is not None:
        return False
    if result.kind in ("int", "bigint", "decimal"):
        digits = _INTEGER_DIGITS.get(result.kind, result.precision - result.scale)
        scale = result.scale if result.kind == "decimal" else 0
        if goal.kind == "integer":
            return scale == 0 and digits <= min(goal.precision or 38, 18 if goal.bits else 38)
        return (goal.kind == "decimal" and (goal.scale or 0) >= scale
                and (goal.precision or 38) - (goal.scale or 0) >= digits)
    if result.kind == "string":
        return goal.kind == "string" and goal.length is None
    return (result.kind, goal.kind) in {("double", "float"), ("boolean", "boolean"),
                                        ("date", "date"), ("timestamp", "timestamp")}


def refusals(table: TablePlan) -> list[tuple[str, str]]:
    """(what, the setting) of the table's filter and computed columns with no exact
    Snowflake form; empty: both run in Snowflake."""
    out = []
    if table.filter:
        try:
            _translate(table, table.filter, dict(table.filter_inputs))
        except ReplicatorError as exc:
            out.append((f"the filter: {exc.message}", "filter"))
    for column in table.computed_columns:
        assert column.expression is not None
        try:
            _, result = _translate(table, column.expression, dict(column.expression_inputs))
        except ReplicatorError as exc:
            out.append((f"computed column {column.target_column}: {exc.message}", "columns"))
            continue
        if not _keeps(result, column):
            what = "a mask" if column.mask else f"type {column.target_type.describe()}"
            out.append((f"computed column {column.target_column}: its {result} value into "
                        f"{what}", "columns"))
    return out


__all__ = ["computed_sql", "computed_value", "describe", "filter_sql", "refusals"]
