"""Which micro-batches take the big-batch path, and what that path does, without Spark or
MySQL: the batch's range comes from Spark's offset log; over ``engine.large_batch_bytes`` the
frame is never evaluated; schema changes are followed before any table is applied; each
table's changes reach the sink as slices under the batch's id (one ``apply`` per table).

This is the path before the landing zone (``REPLICATOR_LANDING=0``), kept until it is
deleted; with the landing zone a big transaction spills to files on the executor."""

from __future__ import annotations

import dataclasses
import json

import pytest

from replicator.engine.checkpoint import EPOCH_SPAN, CheckpointDir
from replicator.engine.transform import BatchApplier
from replicator.errors import EngineError
from replicator.model.changes import BinlogPosition, ChangeEvent, SchemaChange
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan, offline_catalog
from replicator.sink import ApplyResult, slices_of

FILE = "mysql-bin.000001"


@pytest.fixture(autouse=True)
def _without_landing(monkeypatch):
    monkeypatch.setenv("REPLICATOR_LANDING", "0")


class SlicedSink:
    """Records what each apply pulled: its slices' rows (nothing for a skipped batch)."""

    def __init__(self):
        self.applied = []

    def apply(self, table, batch_id, end_offset, staged):
        pieces = [piece.to_pylist() for piece in slices_of(staged)]
        self.applied.append((table.source_name, batch_id, end_offset, pieces))
        return ApplyResult(skipped=False, rows=sum(map(len, pieces)), seconds_stage=0.0,
                           seconds_merge=0.0)


class Frame:
    def __init__(self):
        self.evaluated = False

    def toArrow(self):  # Spark's name
        self.evaluated = True
        import pyarrow as pa

        from replicator.engine.datasource import arrow_schema

        return pa.Table.from_batches([], schema=arrow_schema())


def _applier(tmp_path, limit):
    columns = (ColumnMapping("id", source_type="int"), ColumnMapping("name", source_type="varchar(20)"))
    pipeline = Pipeline(
        name="unit", source=MySQLSource(), target=TargetConfig(DuckDBTarget("unused.duckdb")),
        tables=(TablePipeline("shop", "a", key=("id",), columns=columns),
                TablePipeline("shop", "b", key=("id",), columns=columns)),
        engine=EngineConfig(large_batch_bytes=limit),
    )
    plan = build_plan(pipeline, offline_catalog(pipeline))
    checkpoint = CheckpointDir(tmp_path)
    checkpoint.create()
    return BatchApplier(pipeline, plan, SlicedSink(), checkpoint, epoch=1,
                        stream_start=BinlogPosition(FILE, 4))


def _log_offset(checkpoint, batch, pos):
    offsets = checkpoint.stream_dir / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n'
                                      f'{json.dumps({"file": FILE, "pos": pos})}\n')


def _event(table, pos, index, key, name):
    return ChangeEvent(table=table, op="c", position=BinlogPosition(FILE, pos), row_index=index,
                       ts_ms=1000 + pos, before=None, after={"id": key, "name": name},
                       end_position=BinlogPosition(FILE, pos + 50))


@pytest.fixture()
def ranges(monkeypatch):
    """The ranges apply_range was asked for (instead of reading them)."""
    seen = []

    def apply_range(self, start, end, spark_batch_id, end_offset):
        seen.append((start, end, spark_batch_id))
        from replicator.engine.metrics import BatchReport

        return BatchReport("stream", spark_batch_id, end_offset)

    monkeypatch.setattr(BatchApplier, "apply_range", apply_range)
    return seen


def test_a_batch_over_the_limit_is_never_evaluated_by_spark(tmp_path, ranges):
    applier = _applier(tmp_path, limit=1000)
    _log_offset(applier.checkpoint, 0, 500)  # 496 bytes from the stream's start
    _log_offset(applier.checkpoint, 1, 5000)  # 4500 bytes from batch 0's end
    small, big = Frame(), Frame()
    applier(small, 0)
    applier(big, 1)
    assert small.evaluated and not big.evaluated
    assert ranges == [(BinlogPosition(FILE, 500), BinlogPosition(FILE, 5000), 1)]
    assert applier.batches == 2


def test_the_first_batch_starts_at_the_stream_start_and_zero_turns_the_path_off(tmp_path, ranges):
    applier = _applier(tmp_path, limit=1000)
    _log_offset(applier.checkpoint, 0, 9000)
    applier(Frame(), 0)
    assert ranges == [(BinlogPosition(FILE, 4), BinlogPosition(FILE, 9000), 0)]
    off = _applier(tmp_path / "off", limit=0)
    _log_offset(off.checkpoint, 0, 9000)
    frame = Frame()
    off(frame, 0)
    assert frame.evaluated and len(ranges) == 1


def _fake_reads(applier, events, schema_changes, reads):
    def read(start, end, *, tables=None, rows=True):
        reads.append((tuple(tables or ()), rows))
        if not rows:
            return iter(schema_changes)
        wanted = {name.lower() for name in tables}
        return iter([e for e in events if e.table.lower() in wanted])

    applier._read = read


def test_apply_range_stages_each_table_in_slices_under_the_batch_id(tmp_path, monkeypatch):
    monkeypatch.setattr("replicator.engine.transform.SLICE_ROWS", 2)
    applier = _applier(tmp_path, limit=1)
    events = [_event("shop.a", 100 + i, 0, i % 3, f"v{i}") for i in range(5)]
    reads = []
    _fake_reads(applier, events, [], reads)
    report = applier.apply_range(BinlogPosition(FILE, 4), BinlogPosition(FILE, 200), 7,
                                 {"file": FILE, "pos": 200})
    # Schema changes first, then one pass per table; b had no changes: no apply, no state row.
    assert reads[0][1] is False and [r for r in reads[1:]] == [(("shop.a",), True),
                                                                (("shop.b",), True)]
    [(table, batch_id, offset, pieces)] = applier.sink.applied
    assert (table, batch_id, offset) == ("shop.a", EPOCH_SPAN + 7, {"file": FILE, "pos": 200})
    assert [len(piece) for piece in pieces] == [2, 2, 1]  # compacted per slice
    seqs = [row["_REPLICATOR_SEQ"] for piece in pieces for row in piece]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5  # global across slices
    last = {}
    for piece in pieces:
        for row in piece:
            last[row["ID"]] = row["NAME"]
    assert last == {0: "v3", 1: "v4", 2: "v2"}
    assert [(t.table, t.changes, t.rows) for t in report.tables] == [("shop.a", 5, 5)]


def test_apply_range_stops_at_a_schema_change_it_cannot_follow_before_applying(tmp_path):
    applier = _applier(tmp_path, limit=1)
    drop = SchemaChange(database="shop", sql="ALTER TABLE a DROP COLUMN name", kind="alter",
                        tables=("shop.a",), position=BinlogPosition(FILE, 90), ts_ms=0)
    _fake_reads(applier, [_event("shop.a", 100, 0, 1, "x")], [drop], [])
    with pytest.raises(EngineError) as stopped:
        applier.apply_range(BinlogPosition(FILE, 4), BinlogPosition(FILE, 200), 3, None)
    assert "DROP COLUMN" in stopped.value.message
    assert applier.sink.applied == []


def test_scd2_tables_get_their_whole_share_as_one_slice(tmp_path, monkeypatch):
    monkeypatch.setattr("replicator.engine.transform.SLICE_ROWS", 2)
    applier = _applier(tmp_path, limit=1)
    tables = tuple(dataclasses.replace(t, mode="scd2") for t in applier.pipeline.tables)
    applier.pipeline = dataclasses.replace(applier.pipeline, tables=tables)
    applier.plan = build_plan(applier.pipeline, offline_catalog(applier.pipeline))
    _fake_reads(applier, [_event("shop.b", 100 + i, 0, i, "x") for i in range(5)], [], [])
    applier.apply_range(BinlogPosition(FILE, 4), BinlogPosition(FILE, 200), 1, None)
    [(_, _, _, pieces)] = applier.sink.applied
    assert [len(piece) for piece in pieces] == [5]
