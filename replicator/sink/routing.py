"""Routing's adapt step: every row image of a routed table names the source table it came from.

A target fed by a ``sources:`` selection keys its rows by (``SOURCE_TABLE_COLUMN``, *key)
(``plan.routing``). Putting the value into the before/after images, before anything else looks
at them, makes compaction, the MERGE, SCD2 versions and changelog rows key on it with no code
of their own: equal keys of two shards are two rows, and a key updated many times in one
batch compacts within its own shard only. The value is ``metadata: [source_table]``'s
(``sink.staging.METADATA_VALUES``): ``db.table`` as MySQL names it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from replicator.model.pipeline import SOURCE_TABLE_COLUMN
from replicator.sink.staging import METADATA_VALUES

if TYPE_CHECKING:
    from replicator.model.changes import ChangeEvent
    from replicator.plan.model import TablePlan


def with_source_table(table: TablePlan, events: list[ChangeEvent]) -> list[ChangeEvent]:
    """The events with ``SOURCE_TABLE_COLUMN`` in their images (routed tables only)."""
    if not table.routed:
        return events
    value_of = METADATA_VALUES[SOURCE_TABLE_COLUMN]

    def tagged(image: dict[str, Any] | None, value: str) -> dict[str, Any] | None:
        return None if image is None else {**image, SOURCE_TABLE_COLUMN: value}

    adapted = []
    for event in events:
        value = value_of(event)
        adapted.append(dataclasses.replace(event, before=tagged(event.before, value),
                                           after=tagged(event.after, value)))
    return adapted
