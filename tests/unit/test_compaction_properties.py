"""Compacting a batch then applying it == applying every change in order (dict reference)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.compaction import compact, event_key, split_key_change

KEY = ("a", "b")


def apply_in_order(state: dict, events: list[ChangeEvent]) -> dict:
    """The reference: what MySQL itself did, one change at a time."""
    state = dict(state)
    for event in events:
        if event.op in ("u", "d"):
            state.pop(tuple(event.before[c] for c in KEY), None)
        if event.op in ("c", "u", "r"):
            state[tuple(event.after[c] for c in KEY)] = event.after
    return state


def apply_compacted(state: dict, events: list[ChangeEvent]) -> dict:
    """What the MERGE does with the compacted batch: deletes delete, the rest upserts."""
    state = dict(state)
    keys = [event_key(e, KEY) for e in events]
    assert len(keys) == len(set(keys)), "compaction left two changes for one key"
    for event, key in zip(events, keys, strict=True):
        if event.op == "d":
            state.pop(key, None)
        else:
            state[key] = event.after
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


@settings(max_examples=300, deadline=None)
@given(histories(), st.randoms())
def test_compacting_then_applying_equals_applying_in_order(history, rnd):
    initial, events = history
    shuffled = list(events)
    rnd.shuffle(shuffled)  # compaction orders by position, not by arrival
    expected = apply_in_order(initial, events)
    assert apply_compacted(initial, compact(shuffled, KEY)) == expected


def _event(op, before=None, after=None, pos=4, row_index=0):
    return ChangeEvent("db.t", op, BinlogPosition("mysql-bin.000001", pos), row_index, 0,
                       before=before, after=after)


def test_key_update_splits_into_delete_and_insert():
    event = _event("u", before={"a": 1, "b": "x", "v": 0}, after={"a": 2, "b": "x", "v": 0})
    delete_old, insert_new = split_key_change(event, KEY)
    assert (delete_old.op, delete_old.before, delete_old.after) == ("d", event.before, None)
    assert (insert_new.op, insert_new.before, insert_new.after) == ("c", None, event.after)


def test_update_keeping_the_key_is_not_split():
    event = _event("u", before={"a": 1, "b": "x", "v": 0}, after={"a": 1, "b": "x", "v": 9})
    assert split_key_change(event, KEY) == [event]


def test_delete_after_update_wins_and_key_updated_twice():
    row = {"a": 1, "b": "x", "v": 0}
    events = [
        _event("u", before=row, after={**row, "v": 1}, row_index=0),
        _event("u", before={**row, "v": 1}, after={**row, "v": 2}, row_index=1),
        _event("d", before={**row, "v": 2}, row_index=2),
    ]
    (only,) = compact(events, KEY)
    assert only.op == "d" and only.row_index == 2
