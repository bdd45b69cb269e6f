"""DuckDB's form of Spark's values: the DuckDB type of each Spark type, a constant as a
DuckDB literal, and Spark's ANSI CAST (and try_cast) between Spark types as DuckDB SQL, with
``error('[ERROR_CLASS] ...')`` in the branch where Spark fails and DuckDB would not.

Literals the user wrote are part of the expression and rendered as SQL literals; row values
never enter SQL text.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.values import common_cast, common_literal, common_text, guarded


def duck_type(spark_type: SparkType) -> str:
    kind = spark_type.kind
    if kind == "decimal":
        return f"DECIMAL({spark_type.precision},{spark_type.scale})"
    return {"boolean": "BOOLEAN", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE",
            "string": "VARCHAR", "date": "DATE", "timestamp": "TIMESTAMP", "binary": "BLOB",
            "null": "INTEGER", "any": "VARCHAR"}[kind]


def string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def fail_sql(error_class: str, message: str) -> str:
    return f"error({string_literal(f'[{error_class}] {message}')})"


def literal_sql(value: Any, spark_type: SparkType) -> str:
    """A constant of the expression (written by the user, or folded from what they wrote)."""
    kind = spark_type.kind
    if value is not None and kind == "decimal":
        return f"CAST({string_literal(format(Decimal(value), 'f'))} AS {duck_type(spark_type)})"
    if value is not None and kind == "binary":
        return f"unhex({string_literal(bytes(value).hex())})"
    common = common_literal(value, spark_type, duck_type, string_literal)
    if common is None:
        raise Untranslatable(f"no literal of type {spark_type}")
    return common


# -- implicit and explicit casts ------------------------------------------------------------

# Spark's UTF8String.trimAll(), which casts to int, boolean and dates use: it tests each BYTE
# for Java whitespace or ISO control, so only ASCII ones (0x00-0x20, DEL) go; a character
# beyond ASCII (U+0085, U+00A0, U+3000) is kept and the cast fails (measured on Spark 4).
_WS_CLASS = "[\\x00-\\x20\\x7f]"


def _trim_all(sql: str) -> str:
    return f"regexp_replace({sql}, '^{_WS_CLASS}+|{_WS_CLASS}+$', '', 'g')"


def _timestamp_text(sql: str) -> str:
    # Spark prints the fraction without trailing zeros, and none when it is zero.
    return f"regexp_replace(strftime({sql}, '%Y-%m-%d %H:%M:%S.%f'), '\\.?0+$', '')"


def to_string_sql(sql: str, source: SparkType) -> str:
    common = common_text(sql, source)
    if common is not None:
        return common
    kind = source.kind
    if kind in ("int", "bigint", "decimal"):
        return f"CAST({sql} AS VARCHAR)"
    if kind == "date":
        return f"strftime({sql}, '%Y-%m-%d')"
    if kind == "timestamp":
        return f"CASE WHEN {sql} IS NOT NULL THEN regexp_replace({_timestamp_text(sql)}, ':(\\d\\d)$', ':\\1') END"
    raise Untranslatable(f"CAST of {source} to string")


def cast_sql(sql: str, source: SparkType, target: SparkType, *, safe: bool = False) -> str:
    """``sql`` (of Spark type ``source``) as ``target``: Spark's ANSI CAST (``safe``: try_cast,
    NULL where CAST fails)."""
    common = common_cast(sql, source, target, duck_type)
    if common is not None:
        return common
    s, t = source.kind, target.kind

    def checked(condition: str, value: str, error_class: str, what: str) -> str:
        return guarded(sql, condition, value, "NULL" if safe else fail_sql(error_class, what))

    if t == "string":
        return to_string_sql(sql, source)
    if t in ("int", "bigint"):
        low, high = ("-2147483648", "2147483647") if t == "int" else ("-9223372036854775808", "9223372036854775807")
        if s == "boolean":
            return f"CAST({sql} AS {duck_type(target)})"
        if s == "string":
            text = _trim_all(sql)
            return checked(f"regexp_matches({text}, '^[+-]?[0-9]+$') AND "
                           f"TRY_CAST({text} AS HUGEINT) BETWEEN {low} AND {high}",
                           f"CAST({text} AS {duck_type(target)})", "CAST_INVALID_INPUT",
                           f"a STRING value cannot be cast to {t.upper()} because it is malformed")
        if s == "double":
            return checked(f"NOT isnan({sql}) AND NOT isinf({sql}) AND trunc({sql}) BETWEEN {low} AND {high}",
                           f"CAST(trunc({sql}) AS {duck_type(target)})", "CAST_OVERFLOW",
                           f"a DOUBLE value cannot be cast to {t.upper()} due to an overflow")
        if s == "decimal":
            return checked(f"trunc({sql}) BETWEEN {low} AND {high}",
                           f"CAST(trunc({sql}) AS {duck_type(target)})", "CAST_OVERFLOW",
                           f"a DECIMAL value cannot be cast to {t.upper()} due to an overflow")
        if s in ("int", "bigint"):
            return checked(f"{sql} BETWEEN {low} AND {high}", f"CAST({sql} AS {duck_type(target)})",
                           "CAST_OVERFLOW", f"the value cannot be cast to {t.upper()} due to an overflow")
    if t == "decimal":
        p, sc = target.precision, target.scale
        bound = f"1e{p - sc}"
        if s in ("int", "bigint", "decimal", "boolean"):
            value = f"CAST({sql} AS DECIMAL(38,{sc}))" if s != "decimal" else f"round({sql}, {sc})"
            if s == "boolean":
                value = f"CAST(CAST({sql} AS INTEGER) AS DECIMAL(38,{sc}))"
            return checked(f"abs({value}) < {bound}", f"CAST({value} AS {duck_type(target)})",
                           "NUMERIC_VALUE_OUT_OF_RANGE",
                           f"the value cannot be represented as Decimal({p}, {sc})")
        raise Untranslatable(f"CAST of {source} to {target}")
    if t == "double":
        if s in ("int", "bigint", "decimal", "boolean"):
            return f"CAST({sql} AS DOUBLE)"
        raise Untranslatable(f"CAST of {source} to double")
    if t == "boolean":
        if s == "string":
            text = f"lower({_trim_all(sql)})"
            failure = "NULL" if safe else fail_sql("CAST_INVALID_INPUT", "a STRING value cannot be cast to BOOLEAN")
            return (f"CASE WHEN {sql} IS NULL THEN NULL WHEN {text} IN ('t', 'true', 'y', 'yes', '1') THEN TRUE "
                    f"WHEN {text} IN ('f', 'false', 'n', 'no', '0') THEN FALSE ELSE {failure} END")
        return f"({sql} <> 0)"
    if t == "binary" and s == "string":
        return f"encode({sql})"
    raise Untranslatable(f"CAST of {source} to {target}")
