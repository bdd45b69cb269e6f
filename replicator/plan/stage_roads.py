"""Which road a table's batches take under ``target.snowflake.stage`` (docs/decisions/
stage-mixed-roads.md).

The stage's road: Snowflake COPYs the batch's change files from the stage and runs the
transform step itself (``statements.stage_copy``), no row crossing the driver. The driver's
road, for a table whose transform step the stage cannot render in Snowflake SQL yet
(``stage_copy.refusals``: which ones is that module's rule): the driver reads the change
files from ``engine.landing``, stages them in DuckDB and PUTs the staged rows, as without a
stage. Both roads end in the same batch program (MERGE, state row, COMMIT), so an atomic
batch spans tables of both in one transaction. The plan warns R312 for each such table and
`plan` prints its road.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan
from replicator.plan.statements import stage_copy


def driver_reasons(table: TablePlan) -> list[tuple[str, str]]:
    """(what, the setting) that sends the table's batches to the driver under a stage; empty:
    the stage's road. An outbox route's reason is the route (its columns come from the
    payload and have no MySQL type to cast)."""
    refused = stage_copy.refusals(table)
    if table.outbox is not None:
        return [(what, setting) for what, setting in refused if setting == "outbox"] or refused
    return refused


def staged_by_driver(table: TablePlan, dialect: Dialect) -> bool:
    """Whether, under ``dialect``'s external stage, the driver stages the table's batches."""
    return bool(dialect.external_stage) and bool(stage_copy.refusals(table))


__all__ = ["driver_reasons", "staged_by_driver"]
