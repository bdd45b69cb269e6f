"""Filters and computed columns (Spark SQL) as DuckDB SQL over a change batch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicator.errors import ReplicatorError
    from replicator.plan.model import PlannedColumn, TablePlan


def translatable(table: TablePlan) -> bool:
    return not table.filter and not table.computed_columns


def filter_sql(table: TablePlan, kinds: dict[str, str]) -> str:
    raise NotImplementedError


def computed_sql(column: PlannedColumn, kinds: dict[str, str]) -> str:
    raise NotImplementedError


def result_kind(column: PlannedColumn) -> str:
    raise NotImplementedError


def evaluation_error(table: TablePlan, exc: Any) -> ReplicatorError | None:
    return None
