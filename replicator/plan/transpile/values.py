"""The forms of Spark's values both dialects write alike (``casts``: DuckDB, ``snowflake_casts``:
Snowflake), given the dialect's type names (``sql_type``) and string escapes (``quote``): the
literals of most types, the casts that only re-type a value, the text of a text, a boolean or NULL, and a
CAST that fails (or gives NULL) outside its condition. What a dialect writes its own way stays
in its module. Literals the user wrote are rendered as SQL literals; row values never enter
SQL text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from replicator.plan.expressions.spark_types import SparkType

TypeName = Callable[[SparkType], str]  # the dialect's type of a Spark type
Quote = Callable[[str], str]  # a string constant in the dialect's escapes


def common_literal(value: Any, spark_type: SparkType, sql_type: TypeName, quote: Quote) -> str | None:
    """A constant the dialects write alike; None for a kind each writes its own way."""
    if value is None:
        return f"CAST(NULL AS {sql_type(spark_type)})"
    kind = spark_type.kind
    if kind == "boolean":
        return "TRUE" if value else "FALSE"
    if kind in ("int", "bigint"):
        return f"CAST({int(value)} AS {sql_type(spark_type)})"
    if kind == "double":
        return f"CAST({quote(repr(float(value)))} AS {sql_type(spark_type)})"
    if kind == "string":
        return quote(value)
    if kind == "date":
        return f"CAST({quote(value.isoformat())} AS {sql_type(spark_type)})"
    if kind == "timestamp":
        return f"CAST({quote(value.isoformat(sep=' '))} AS {sql_type(spark_type)})"
    return None


def common_cast(sql: str, source: SparkType, target: SparkType, sql_type: TypeName) -> str | None:
    """The casts the dialects write alike (the value only re-typed); None for the others."""
    s, t = source.kind, target.kind
    if source == target or s == "any":
        return sql  # every node is already in the dialect's form of its Spark type
    if s == "null":
        return f"CAST({sql} AS {sql_type(target)})"
    if (s, t) in (("timestamp", "date"), ("date", "timestamp")):
        return f"CAST({sql} AS {sql_type(target)})"
    return None


def common_text(sql: str, source: SparkType) -> str | None:
    """Spark's text of a value, where the dialects write it alike (a text, a boolean, NULL);
    None for the others."""
    kind = source.kind
    if kind in ("string", "any"):
        return sql
    if kind == "boolean":
        return f"CASE WHEN {sql} THEN 'true' WHEN NOT {sql} THEN 'false' END"
    if kind == "null":
        return "CAST(NULL AS VARCHAR)"
    return None


def guarded(sql: str, condition: str, value: str, failure: str) -> str:
    """``value`` where ``condition`` holds, ``failure`` (an error, or NULL for try_cast) where
    it does not, NULL for NULL."""
    return f"CASE WHEN {sql} IS NULL THEN NULL WHEN {condition} THEN {value} ELSE {failure} END"
