"""SCD type 2: a batch of changes -> the versions it opens or ends, per key (pure Python).

Semantics follow Spark Declarative Pipelines' ``create_auto_cdc_flow(stored_as_scd_type=2,
track_history_column_list=...)``, sequenced by binlog position:

- a change whose tracked columns differ from the key's current version opens a new version
  (the current one ends when the new one starts);
- a change that touches only untracked columns updates the current version in place;
- a delete ends the current version; a later insert of the key opens a new one.

Only the batch is known here. Whether the key's *first* version of the batch continues the
target's current version (equal tracked columns) or replaces it is decided by the SQL
(``plan.statements.history``), which compares it with the target row.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from replicator.model.changes import ChangeEvent
from replicator.model.compaction import event_key, split_key_change


def change_seq(event: ChangeEvent) -> str:
    """A change's binlog position as text that sorts like ``ChangeEvent.order``.

    A snapshot read carries the position recorded before the copy, which is also where the
    next transaction starts: the ``r`` (marked 0) sorts before that transaction's changes
    (marked 1), whose effect the copy did not see.
    """
    sequence, pos, row_index = event.order
    kind = 0 if event.op == "r" else 1
    return f"{sequence:010d}.{pos:020d}.{kind}{row_index:010d}"


def change_seq_at(sequence: int, pos: int) -> str:
    """``change_seq`` of a statement at binlog file ``sequence``, position ``pos`` that has no
    rows (a followed TRUNCATE): after a snapshot read there, before any row after it."""
    return f"{sequence:010d}.{pos:020d}.1{0:010d}"


@dataclass
class Version:
    """One version of a key, as the batch leaves it."""

    op: str  # op of the last change folded in; "d": ends the target's current version
    image: dict[str, Any]  # the row (after-image; before-image of a delete)
    event: ChangeEvent  # the last change folded in (metadata columns come from it)
    valid_from_ms: int
    valid_to_ms: int | None  # None: still current when the batch ends
    change_seq: str  # position of the last change folded in, or of the delete that ended it


def ordered_changes(
    events: Sequence[ChangeEvent],
    key_columns: Sequence[str],
    passes: Callable[[dict[str, Any]], bool] | None,
) -> list[tuple[str, dict[str, Any], ChangeEvent]]:
    """Every change in binlog order as (op, image, event), key updates split, filter applied.

    A change whose row leaves the filter becomes a delete of its before-image; a change of a
    row that never matched is dropped (the target never held it).
    """
    split = [part for event in events for part in split_key_change(event, key_columns)]
    split.sort(key=lambda event: event.order)
    out = []
    for event in split:
        if event.op == "d":
            assert event.before is not None
            if passes is None or passes(event.before):
                out.append(("d", event.before, event))
            continue
        assert event.after is not None
        if passes is None or passes(event.after):
            out.append((event.op, event.after, event))
        elif event.before is not None and passes(event.before):
            out.append(("d", event.before, event))  # the row stopped matching
    return out


def versions(
    changes: Sequence[tuple[str, dict[str, Any], ChangeEvent]],
    key_columns: Sequence[str],
    tracked: Sequence[str],
) -> list[Version]:
    """The versions the changes produce, grouped by key in order of each key's first change."""
    by_key: dict[tuple[Hashable, ...], list[Version]] = {}
    current: dict[tuple[Hashable, ...], Version] = {}
    for op, image, event in changes:
        key = event_key(event, key_columns)
        out = by_key.setdefault(key, [])
        open_version = current.get(key)
        if op == "d":
            if open_version is not None:
                open_version.valid_to_ms = event.ts_ms
                open_version.change_seq = change_seq(event)
                del current[key]
            elif not out:  # ends the version the target holds
                out.append(Version("d", image, event, event.ts_ms, None, change_seq(event)))
            continue
        if open_version is not None and all(
            open_version.image.get(c) == image.get(c) for c in tracked
        ):
            open_version.op, open_version.image, open_version.event = op, image, event
            open_version.change_seq = change_seq(event)
            continue
        if open_version is not None:
            open_version.valid_to_ms = event.ts_ms
        version = Version(op, image, event, event.ts_ms, None, change_seq(event))
        out.append(version)
        current[key] = version
    return [version for out in by_key.values() for version in out]
