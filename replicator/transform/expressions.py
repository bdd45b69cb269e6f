"""Filters and computed columns of a TablePlan as DuckDB SQL over a change batch's columns
(the translation itself: ``plan.transpile``), and their failures as Spark's errors."""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from replicator.plan.expressions.errors import EvaluationError, ExpressionError
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.translator import result_type, translate

if TYPE_CHECKING:
    from replicator.errors import ReplicatorError
    from replicator.plan.expressions.spark_types import SparkType
    from replicator.plan.model import PlannedColumn, TablePlan


def _mysql_names(table: TablePlan) -> dict[str, str | None]:
    return {c.source_column: (c.mysql_type.name if c.mysql_type else None)
            for c in table.data_columns if c.source_column}


def computed_sql(column: PlannedColumn, kinds: Mapping[str, str], table: TablePlan | None = None) -> str:
    assert column.expression is not None
    sql, _ = translate(column.expression, dict(column.expression_inputs), kinds,
                       _mysql_names(table) if table is not None else None)
    return sql


def filter_inputs(table: TablePlan) -> dict[str, SparkType]:
    """The Spark type of every source column a filter may read (the plan records them)."""
    return dict(table.filter_inputs)


def filter_sql(table: TablePlan, kinds: Mapping[str, str]) -> str:
    assert table.filter is not None
    sql, _ = translate(table.filter, filter_inputs(table), kinds, _mysql_names(table))
    return sql


@lru_cache(maxsize=256)
def translatable(table: TablePlan) -> bool:
    """Whether the table's filter and computed columns all have a DuckDB form."""
    try:
        for column in table.computed_columns:
            computed_sql(column, {}, table)
        if table.filter:
            filter_sql(table, {})
    except (Untranslatable, ExpressionError):
        return False
    return True


def result_kind(column: PlannedColumn) -> str:
    """The batch kind (``transform.columns.source_kind``) of a computed column's value."""
    assert column.expression is not None
    spark_type = result_type(column.expression, dict(column.expression_inputs))
    return {"boolean": "bool", "int": "int", "bigint": "int", "decimal": "decimal",
            "double": "float", "string": "string", "date": "date", "timestamp": "timestamp",
            "binary": "binary", "null": "null"}.get(spark_type.kind, "string")


_ERROR = re.compile(r"\[([A-Z_]+)\] (.*)")


def evaluation_error(table: TablePlan, exc: Any, key: Mapping[str, Any]) -> ReplicatorError | None:
    """DuckDB's failure of a filter or computed column -> Spark's error class, named."""
    text = str(exc).splitlines()[0]
    match = _ERROR.search(text)
    if match:
        error_class, message = match.groups()
    elif "Overflow" in text or "out of range" in text.lower():
        error_class, message = "ARITHMETIC_OVERFLOW", text
    else:
        return None
    if not table.computed_columns and not table.filter:
        return None
    parts = [f"computed column {c.target_column} ({c.expression})" for c in table.computed_columns]
    if table.filter:
        parts.append(f"filter ({table.filter})")
    row_key = ", ".join(f"{k}={v!r}" for k, v in key.items()) or "no key"
    return EvaluationError(error_class, f"{table.source_name}: {' or '.join(parts)} fails on the "
                           f"row with {row_key}: {message}")
