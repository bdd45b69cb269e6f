"""Staging a merge table's batch (``transform.stage_batch``: key-update split, the last change
per key) then applying it == applying every change in order (dict reference)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan, offline_catalog
from replicator.plan.model import STAGE_OP
from tests.fixtures.row_transforms import stage_events

KEY = ("a", "b")
PIPELINE = """
version: 1
source: {mysql: {host: h, password: "${P:-}"}}
target: {duckdb: {path: w.duckdb}}
tables:
  - source: db.t
    key: [a, b]
    columns:
      a: {source_type: int}
      b: {source_type: varchar(4)}
      v: {source_type: int}
"""


@functools.lru_cache(maxsize=1)
def _table():
    path = Path(tempfile.mkdtemp()) / "p.yaml"
    path.write_text(PIPELINE)
    pipeline = load_pipeline(path, environ={})
    return build_plan(pipeline, offline_catalog(pipeline)).tables[0]


def compact(events: list[ChangeEvent]) -> list[tuple[str, dict]]:
    """The staged rows of ``events``: (op, row image by source column), in staging order."""
    return [(r[STAGE_OP], {"a": r["A"], "b": r["B"], "v": r["V"]})
            for r in stage_events(_table(), events).to_pylist()]


def apply_in_order(state: dict, events: list[ChangeEvent]) -> dict:
    """The reference: what MySQL itself did, one change at a time."""
    state = dict(state)
    for event in events:
        if event.op in ("u", "d"):
            state.pop(tuple(event.before[c] for c in KEY), None)
        if event.op in ("c", "u", "r"):
            state[tuple(event.after[c] for c in KEY)] = event.after
    return state


def apply_compacted(state: dict, rows: list[tuple[str, dict]]) -> dict:
    """What the MERGE does with the staged batch: deletes delete, the rest upserts."""
    state = dict(state)
    keys = [tuple(image[c] for c in KEY) for _, image in rows]
    assert len(keys) == len(set(keys)), "staging left two changes for one key"
    for (op, image), key in zip(rows, keys, strict=True):
        if op == "d":
            state.pop(key, None)
        else:
            state[key] = image
    return state


@st.composite
def histories(draw):
    """A valid change history of a small table (ops are consistent with the rows present)."""
    state: dict = {}
    initial = dict(state)
    events = []
    txn_pos = 4
    for _ in range(draw(st.integers(0, 30))):
        key = (draw(st.integers(0, 3)), draw(st.sampled_from(["x", "y"])))
        row_value = draw(st.integers(0, 5))
        if key in state:
            op = draw(st.sampled_from(["u", "d", "k"]))  # k: an update that changes the key
        else:
            op = draw(st.sampled_from(["c", "r"]))
        before = state.get(key)
        if op == "k":
            new_key = (draw(st.integers(0, 3)), draw(st.sampled_from(["x", "y"])))
            if new_key in state and new_key != key:
                continue
            after = {"a": new_key[0], "b": new_key[1], "v": row_value}
            op = "u"
        elif op == "d":
            after = None
        else:
            after = {"a": key[0], "b": key[1], "v": row_value}
        if op in ("u", "d"):
            state.pop(key)
        if after is not None:
            state[(after["a"], after["b"])] = after
        txn_pos += draw(st.sampled_from([0, 0, 100]))  # several rows in one transaction
        events.append(
            ChangeEvent(
                table="db.t",
                op=op,
                position=BinlogPosition("mysql-bin.000001", txn_pos),
                row_index=len(events),
                ts_ms=0,
                before=before,
                after=after,
            )
        )
    return initial, events


@settings(max_examples=100, deadline=None)
@given(histories(), st.randoms())
def test_compacting_then_applying_equals_applying_in_order(history, rnd):
    initial, events = history
    shuffled = list(events)
    rnd.shuffle(shuffled)  # compaction orders by position, not by arrival
    expected = apply_in_order(initial, events)
    assert apply_compacted(initial, compact(shuffled)) == expected


def _event(op, before=None, after=None, pos=4, row_index=0):
    return ChangeEvent("db.t", op, BinlogPosition("mysql-bin.000001", pos), row_index, 0,
                       before=before, after=after)


def test_key_update_splits_into_delete_and_insert():
    event = _event("u", before={"a": 1, "b": "x", "v": 0}, after={"a": 2, "b": "x", "v": 0})
    assert compact([event]) == [("d", event.before), ("c", event.after)]


def test_update_keeping_the_key_is_not_split():
    event = _event("u", before={"a": 1, "b": "x", "v": 0}, after={"a": 1, "b": "x", "v": 9})
    assert compact([event]) == [("u", event.after)]


def test_delete_after_update_wins_and_key_updated_twice():
    row = {"a": 1, "b": "x", "v": 0}
    events = [
        _event("u", before=row, after={**row, "v": 1}, row_index=0),
        _event("u", before={**row, "v": 1}, after={**row, "v": 2}, row_index=1),
        _event("d", before={**row, "v": 2}, row_index=2),
    ]
    (only,) = compact(events)
    assert only == ("d", {**row, "v": 2})
