"""Spark SQL -> DuckDB SQL: filters and computed columns as the transform step runs them.

The user writes Spark SQL (one dialect for ``filter:`` and ``expression:``); ``plan.expressions``
parses and type-checks it (Spark 4's analyzer types, ANSI mode). This package writes the same
expression as a DuckDB expression that gives Spark's value in Spark's type on every row, so the
transform step (``transform.stage``) evaluates it vectorized inside its one statement. This
module holds the DuckDB translator (the dispatch over node types is ``base``'s) and the
entry points (``translate``, ``result_type``, and ``describe_transforms`` for
``replicator plan``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.parsing import parse
from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.identifiers import quote_identifier as q
from replicator.plan.transpile.casts import duck_type
from replicator.plan.transpile.date_functions import DateFunctions
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.numeric_functions import NumericFunctions
from replicator.plan.transpile.string_functions import StringFunctions


class _Translator(StringFunctions, NumericFunctions, DateFunctions):
    """Spark SQL nodes -> DuckDB SQL: the dispatch and the shared rules are
    ``base.BaseTranslator``'s, the dialect ``operators.OperatorTranslator``'s, each function
    family (``fn_<name>``) its own module's."""


# -- what the transform step calls ------------------------------------------------------------

def translate(text: str, inputs: Mapping[str, SparkType], kinds: Mapping[str, str] | None = None,
              mysql_types: Mapping[str, str | None] | None = None) -> tuple[str, SparkType]:
    """``text`` (Spark SQL over source columns of these Spark types) as DuckDB SQL over the
    batch's columns of the same names, and its Spark result type."""
    kinds = kinds or {}
    mysql_types = mysql_types or {}

    def column_sql(name: str) -> str:
        spark_type = inputs[name]
        value = q(name)
        kind = kinds.get(name, "string")
        if mysql_types.get(name) == "time":
            return (f"CASE WHEN regexp_matches({value}, '\\.0*$') THEN regexp_replace({value}, '\\.0*$', '') "
                    f"WHEN {value} LIKE '%.%' THEN rpad({value}, strpos({value}, '.') + 6, '0') ELSE {value} END")
        if spark_type.kind == "binary" and kind in ("int", "uint"):
            raise Untranslatable(f"column {name}: BIT values read as BINARY")
        if spark_type.kind in ("int", "bigint", "decimal") and kind == "bool":
            return f"CAST(CAST({value} AS INTEGER) AS {duck_type(spark_type)})"
        return f"CAST({value} AS {duck_type(spark_type)})"

    translator = _Translator(inputs, column_sql)
    tree = parse(text)
    return translator.sql(tree), translator.type(tree)


def result_type(text: str, inputs: Mapping[str, SparkType]) -> SparkType:
    """The Spark type of ``text``'s value."""
    return _Translator(inputs, q).type(parse(text))


def describe_transforms(table: Any) -> list[str]:
    """``replicator plan``'s view of a table's transforms: each filter and computed column as
    the transform step runs it (the DuckDB SQL), and each mask; never a salt."""
    lines = []

    def translated(text: str, inputs: Mapping[str, SparkType]) -> str:
        try:
            return translate(text, inputs)[0]
        except (Untranslatable, ExpressionError) as exc:  # plan refuses these; offline: a note
            return f"(not translatable: {exc.message})"

    if table.filter:
        lines += [f"filter: {table.filter}", f"  -> {translated(table.filter, dict(table.filter_inputs))}"]
    for column in table.data_columns:
        if column.expression is not None:
            lines += [f"{column.target_column} = {column.expression}",
                      f"  -> {translated(column.expression, dict(column.expression_inputs))}"]
        if column.mask is not None:
            detail = {"sha256": "sha256 of the value's text" + (" (salted: the salt is a bind "
                                                                 "parameter, never printed)"
                                                                 if column.mask_salt else ""),
                      "md5": "md5 of the value's text", "null": "NULL",
                      "redact": f"redact, keeping the last {column.mask_keep_last}"
                      if column.mask_keep_last else "redact ('***')",
                      "truncate": f"the first {column.mask_length} characters"}[column.mask]
            lines.append(f"{column.target_column}: mask {detail}")
    return lines
