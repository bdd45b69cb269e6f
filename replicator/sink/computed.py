"""Computed columns: add each computed value to the row images a table stages.

An ``adapt_events`` step (``sink.adapt``): for a table with computed columns, every before and
after image gets one more entry per computed column, under ``PlannedColumn.image_key``, the
value of its Spark SQL expression over that image (``plan.expressions``, compiled once per
column). ``sink.staging`` then converts it to the column's target type like any source value,
and ``verify`` computes it the same way from the rows it reads from MySQL.

A row on which Spark itself would fail (division by zero, overflow, an invalid CAST: ANSI
mode) stops the batch with an ``EvaluationError`` naming the table, the column and the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicator.model.changes import ChangeEvent
    from replicator.plan.model import PlannedColumn, TablePlan

Image = dict[str, Any]


@lru_cache(maxsize=256)
def expression_function(column: PlannedColumn) -> Callable[[Image], Any]:
    """Row image (source values as the readers decode them) -> the computed value."""
    from replicator.plan.expressions.compiler import compile_expression
    from replicator.plan.expressions.spark_types import spark_value

    assert column.expression is not None
    inputs = column.expression_inputs
    compiled = compile_expression(column.expression, dict(inputs))

    def evaluate(image: Image) -> Any:
        return compiled({name: spark_value(image.get(name), type_) for name, type_ in inputs})

    return evaluate


@lru_cache(maxsize=64)
def row_filter(table: TablePlan) -> Callable[[Image], bool] | None:
    """The table's filter (Spark SQL) as a per-row test: only TRUE passes. The per-row twin of
    the transform step's (``transform.expressions.filter_sql``), for ``stage_changes`` and
    ``verify``."""
    if not table.filter:
        return None
    from replicator.plan.expressions.compiler import compile_filter
    from replicator.plan.expressions.spark_types import spark_value

    inputs = table.filter_inputs
    compiled = compile_filter(table.filter, dict(inputs))

    def passes(image: Image) -> bool:
        return compiled({name: spark_value(image.get(name), type_) for name, type_ in inputs}) is True

    return passes


def add_computed(table: TablePlan, events: list[ChangeEvent]) -> list[ChangeEvent]:
    columns = table.computed_columns
    if not columns:
        return events
    from replicator.plan.expressions.errors import EvaluationError

    functions = [(c, c.image_key, expression_function(c)) for c in columns]

    def extend(image: Image | None) -> Image | None:
        if image is None:
            return None
        extended = dict(image)
        for column, key, evaluate in functions:
            try:
                extended[key] = evaluate(image)
            except EvaluationError as exc:
                row_key = ", ".join(f"{k}={image.get(k)!r}" for k in table.source_key)
                raise EvaluationError(
                    exc.error_class,
                    f"{table.source_name}: computed column {column.target_column} "
                    f"({column.expression}) fails on the row with {row_key or 'no key'}: "
                    f"{exc.message}",
                ) from None
        return extended

    return [dataclasses.replace(e, before=extend(e.before), after=extend(e.after)) for e in events]
