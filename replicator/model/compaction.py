"""Compaction of a batch of row changes to the last change per key (pure Python).

The MERGE's source must hold at most one row per key (Snowflake fails a MERGE whose source
matches a target row twice as nondeterministic), and applying only the last change per key is
also what makes large batches cheap. The rules, shared with Spark Declarative Pipelines'
``create_auto_cdc_flow`` (keys + sequence_by + apply_as_deletes):

- changes are ordered by ``ChangeEvent.order`` (binlog file, transaction position, row index);
- the last change of a key wins, so a delete wins over every earlier change of its key, and an
  insert after a delete revives the key;
- an update that changes the key is a delete of the old key plus an insert of the new row
  (otherwise the old key would survive in the target).

Every change carries a full row image, so "last wins" loses nothing: applying the compacted
list (deletes delete, everything else upserts) leaves the same rows as applying every change in
order. ``tests/unit/test_compaction_properties.py`` checks exactly that with hypothesis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from replicator.model.changes import ChangeEvent


def _key_of(image: dict[str, Any], key_columns: Sequence[str]) -> tuple[Hashable, ...]:
    return tuple(image.get(column) for column in key_columns)


def event_key(event: ChangeEvent, key_columns: Sequence[str]) -> tuple[Hashable, ...]:
    """The key a change applies to: the after-image's, or the before-image's for a delete."""
    image = event.before if event.op == "d" else event.after
    if image is None:
        raise ValueError(
            f"a {event.op!r} change of {event.table} at {event.position} has no "
            f"{'before' if event.op == 'd' else 'after'}-image"
        )
    return _key_of(image, key_columns)


def split_key_change(event: ChangeEvent, key_columns: Sequence[str]) -> list[ChangeEvent]:
    """An update that changes the key -> [delete of the old key, insert of the new row]."""
    if event.op != "u" or event.before is None or event.after is None:
        return [event]
    if _key_of(event.before, key_columns) == _key_of(event.after, key_columns):
        return [event]
    delete_old = dataclasses.replace(event, op="d", after=None)
    insert_new = dataclasses.replace(event, op="c", before=None)
    return [delete_old, insert_new]


def compact(events: Iterable[ChangeEvent], key_columns: Sequence[str]) -> list[ChangeEvent]:
    """The last change per key, in change order; key updates split first.

    The two halves of a split key update share their event's order but touch different keys,
    so ties never decide anything. Among equal orders of one key the later one in the input
    wins (a stable sort), which only matters for hand-built events.
    """
    split = [part for event in events for part in split_key_change(event, key_columns)]
    split.sort(key=lambda event: event.order)
    last: dict[tuple[Hashable, ...], ChangeEvent] = {}
    for event in split:
        key = event_key(event, key_columns)
        last.pop(key, None)  # re-insert so the dict keeps the order of each key's last change
        last[key] = event
    return list(last.values())
