"""Per-table event adaptation: the changes a table's plan reads -> the changes it stages.

The one place where a table's plan reshapes change events before ``stage_changes``: both the
stream (``engine.applier.BatchApplier.apply_manifest``) and the snapshot chunks go through it,
so a mode that needs it (routing many source tables into one target, outbox flattening) is
applied the same way to copied and streamed rows. Computed columns are not a step: the
transform step's DuckDB statement computes them (``transform.stage_batch``).

Each step is a pure function ``(TablePlan, list[ChangeEvent]) -> list[ChangeEvent]`` living
in its own module and listed in ``_STEPS`` in the order they apply; a step returns its input
unchanged for tables it does not concern (cheaply: no copy).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from replicator.sink.outbox import flatten_outbox
from replicator.sink.routing import with_source_table

if TYPE_CHECKING:
    from replicator.model.changes import ChangeEvent
    from replicator.plan.model import TablePlan

Step = Callable[["TablePlan", "list[ChangeEvent]"], "list[ChangeEvent]"]

_STEPS: tuple[Step, ...] = (with_source_table, flatten_outbox)


def adapt_events(table: TablePlan, events: list[ChangeEvent]) -> list[ChangeEvent]:
    """The events ``table`` stages, after every adaptation step that concerns it."""
    for step in _STEPS:
        events = step(table, events)
    return events
