"""Snowflake's form of Spark's values (``plan.transpile.snowflake``): the Snowflake type of
each Spark type, a constant as a Snowflake literal, a failure carrying Spark's error class,
and Spark's ANSI CAST (and try_cast) between Spark types as Snowflake SQL that gives the
same value on Snowflake and on fakesnow (DuckDB). Literals the user wrote are rendered as
SQL literals; row values never enter SQL text.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.values import common_cast, common_literal, common_text, guarded

_INTEGER_DIGITS = {"int": 10, "bigint": 19, "boolean": 1}
INT_RANGE = {"int": ("-2147483648", "2147483647"),
              "bigint": ("-9223372036854775808", "9223372036854775807")}


def snowflake_type(spark_type: SparkType) -> str:
    kind = spark_type.kind
    if kind == "decimal":
        return f"NUMBER({spark_type.precision},{spark_type.scale})"
    types = {"boolean": "BOOLEAN", "int": "NUMBER(10,0)", "bigint": "NUMBER(19,0)",
             "double": "FLOAT", "string": "VARCHAR", "date": "DATE",
             "timestamp": "TIMESTAMP_NTZ", "null": "NUMBER(10,0)"}
    if kind not in types:
        raise Untranslatable(f"a {spark_type} value in Snowflake SQL")
    return types[kind]


def string_literal(text: str) -> str:
    """A Snowflake string constant: single quotes doubled, and backslashes (Snowflake reads
    escape sequences in single-quoted strings)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def literal_sql(value: Any, spark_type: SparkType) -> str:
    """A constant the user wrote, in the Snowflake form of its Spark type."""
    kind = spark_type.kind
    if value is not None and kind == "decimal":
        return f"CAST({format(Decimal(value), 'f')} AS {snowflake_type(spark_type)})"
    if value is not None and kind == "double":
        number = float(value)
        if number != number or number in (float("inf"), float("-inf")):
            raise Untranslatable("a non-finite DOUBLE literal")
    common = common_literal(value, spark_type, snowflake_type, string_literal)
    if common is None:
        raise Untranslatable(f"a {spark_type} literal in Snowflake SQL")
    return common


def fail_sql(error_class: str, message: str, witness: str, result: SparkType) -> str:
    """An expression of the Snowflake type of ``result`` that fails with Spark's error class
    when evaluated: the cast of a text that is no value of that type. ``witness`` is the
    row's value that failed (never NULL where a failure is reached), so the text depends on
    the row and no optimizer evaluates it in a branch that is not taken."""
    text = f"({string_literal(f'[{error_class}] {message}: ')} || CAST({witness} AS VARCHAR))"
    kind = result.kind
    if kind in ("boolean", "date", "timestamp"):
        return f"CAST({text} AS {snowflake_type(result)})"
    failing = f"CAST({text} AS NUMBER(38,0))"
    if kind in ("string", "double"):
        return f"CAST({failing} AS {snowflake_type(result)})"
    return failing if kind in ("null", "any") else f"CAST({failing} AS {snowflake_type(result)})"


def in_range(sql: str, target: SparkType) -> str:
    """``sql`` (an exact integer NUMBER) as Spark's int or bigint, failing where Spark's
    arithmetic overflows (Snowflake's NUMBER(38,0) does not)."""
    low, high = INT_RANGE[target.kind]
    failure = fail_sql("ARITHMETIC_OVERFLOW", f"{target.kind} overflow", sql, target)
    return (f"CAST(CASE WHEN {sql} NOT BETWEEN {low} AND {high} THEN {failure} ELSE {sql} END "
            f"AS {snowflake_type(target)})")


def _one_or_zero(sql: str) -> str:
    """A boolean as 1 or 0, NULL staying NULL (IFF would read NULL as FALSE)."""
    return f"CASE WHEN {sql} THEN 1 WHEN NOT {sql} THEN 0 END"


def to_string_sql(sql: str, source: SparkType) -> str:
    common = common_text(sql, source)
    if common is not None:
        return common
    kind = source.kind
    if kind in ("int", "bigint") or (kind == "decimal" and source.scale <= 6):
        # Snowflake prints a NUMBER(p,s) with its s digits, as Spark prints a decimal up to
        # scale 6; past it Java's BigDecimal.toString may switch to E notation (0E-10).
        return f"CAST({sql} AS VARCHAR)"
    if kind == "date":
        return f"TO_CHAR({sql}, 'YYYY-MM-DD')"
    raise Untranslatable(f"CAST of {source} to string in Snowflake SQL")


def cast_sql(sql: str, source: SparkType, target: SparkType, *, safe: bool = False) -> str:
    """``sql`` (of Spark type ``source``) as ``target``: Spark's ANSI CAST (``safe``:
    try_cast, NULL where CAST fails)."""
    common = common_cast(sql, source, target, snowflake_type)
    if common is not None:
        return common
    s, t = source.kind, target.kind

    def checked(condition: str, value: str, error_class: str, what: str) -> str:
        return guarded(sql, condition, value, "NULL" if safe else fail_sql(error_class, what, sql, target))

    if t == "string":
        return to_string_sql(sql, source)
    if s == "string" or "binary" in (s, t):
        raise Untranslatable(f"CAST of {source} to {target} in Snowflake SQL")
    if t in ("int", "bigint"):
        low, high = INT_RANGE[t]
        sf = snowflake_type(target)
        if s == "boolean":
            return f"CAST({_one_or_zero(sql)} AS {sf})"
        if s == "double":
            # Bounds as doubles: 2^63 itself is out of range (9223372036854775807 rounds to it).
            return checked(f"{sql} = {sql} AND TRUNC({sql}) >= CAST('{low}' AS FLOAT) "
                           f"AND TRUNC({sql}) < CAST('{int(high) + 1}' AS FLOAT)",
                           f"CAST(TRUNC({sql}) AS {sf})", "CAST_OVERFLOW",
                           f"a DOUBLE value cannot be cast to {t.upper()} due to an overflow")
        value = f"TRUNC({sql})" if s == "decimal" else sql  # towards zero, as Spark
        return checked(f"{value} BETWEEN {low} AND {high}", f"CAST({value} AS {sf})", "CAST_OVERFLOW",
                       f"the value cannot be cast to {t.upper()} due to an overflow")
    if t == "decimal":
        if s not in ("int", "bigint", "decimal", "boolean"):
            raise Untranslatable(f"CAST of {source} to {target} in Snowflake SQL")
        number = _one_or_zero(sql) if s == "boolean" else sql
        # ROUND: half away from zero on both engines, Spark's HALF_UP; the CAST then only
        # re-types a value that fits.
        value = f"ROUND({number}, {target.scale})" if s == "decimal" and source.scale > target.scale else number
        digits = target.precision - target.scale
        carry = 1 if value != number else 0  # ROUND may carry into one more digit (9.99 -> 10.0)
        source_digits = _INTEGER_DIGITS.get(s, source.precision - source.scale) + carry
        if source_digits <= digits:  # every value fits
            return f"CAST({value} AS {snowflake_type(target)})"
        # The bound as an exact integer (1e{digits} would be a FLOAT, and the comparison
        # would round the value to a double), of fewer digits than the value's type holds:
        # DuckDB compares in the value's decimal type.
        return checked(f"ABS({value}) < 1{'0' * digits}",
                       f"CAST({value} AS {snowflake_type(target)})", "NUMERIC_VALUE_OUT_OF_RANGE",
                       f"the value cannot be represented as Decimal({target.precision}, {target.scale})")
    if t == "double":
        if s == "boolean":
            return f"CAST({_one_or_zero(sql)} AS FLOAT)"
        if s in ("int", "bigint", "decimal"):
            return f"CAST({sql} AS FLOAT)"
    if t == "boolean" and s in ("int", "bigint", "decimal", "double"):
        return f"({sql} <> 0)"
    raise Untranslatable(f"CAST of {source} to {target} in Snowflake SQL")


__all__ = ["INT_RANGE", "cast_sql", "fail_sql", "in_range", "literal_sql", "snowflake_type",
           "string_literal", "to_string_sql"]
