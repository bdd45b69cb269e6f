"""The per-batch transform: a micro-batch's manifest (landed files, schema changes) -> per
table, compacted, under the right batch id; DDL it cannot follow stops it. The sink here only
records what it is handed."""

from __future__ import annotations

import dataclasses

import pytest

from replicator.engine.apply.applier import BatchApplier
from replicator.engine.follow.schema_changes import KeyChanged
from replicator.engine.state.checkpoint import EPOCH_SPAN, CheckpointDir
from replicator.errors import EngineError
from replicator.model.changes import BinlogPosition, ChangeEvent, SchemaChange
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan, offline_catalog
from replicator.sink.protocol import ApplyResult, slices_of
from tests.fixtures.landed import land_events


def _pipeline() -> Pipeline:
    columns = (ColumnMapping("id", source_type="int"), ColumnMapping("name", source_type="varchar(20)"))
    return Pipeline(
        name="unit",
        source=MySQLSource(),
        target=TargetConfig(DuckDBTarget("unused.duckdb")),
        tables=(TablePipeline("shop", "a", key=("id",), columns=columns),
                TablePipeline("shop", "b", key=("id",), columns=columns)),
    )


class RecordingSink:
    def __init__(self):
        self.applied = []

    def apply(self, table, batch_id, end_offset, staged, **options):
        rows = [row for piece in slices_of(staged) for row in piece.to_pylist()]
        self.applied.append((table.source_name, batch_id, end_offset, rows))
        return ApplyResult(skipped=False, rows=len(rows), seconds_stage=0.0, seconds_merge=0.0)


def _row(table, op, pos, index, before=None, after=None):
    return ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000001", pos),
                       row_index=index, ts_ms=1000, before=before, after=after,
                       end_position=BinlogPosition("mysql-bin.000001", pos + 50))


@pytest.fixture()
def applier(tmp_path):
    pipeline = _pipeline()
    plan = build_plan(pipeline, offline_catalog(pipeline))
    return BatchApplier(pipeline, plan, RecordingSink(), CheckpointDir(tmp_path), epoch=1)


def test_a_batch_is_compacted_per_table_under_its_epoch_batch_id(applier):
    events = [
        _row("shop.a", "c", 100, 0, None, {"id": 1, "name": "v1"}),
        _row("shop.b", "c", 100, 1, None, {"id": 7, "name": "x"}),
        _row("shop.a", "u", 200, 0, {"id": 1, "name": "v1"}, {"id": 1, "name": "v2"}),
        _row("shop.a", "u", 300, 0, {"id": 1, "name": "v2"}, {"id": 1, "name": "v3"}),
        _row("shop.b", "d", 400, 0, {"id": 7, "name": "x"}, None),
        _row("shop.a", "u", 400, 1, {"id": 2, "name": "k"}, {"id": 3, "name": "k"}),  # key change
    ]
    # Two decode tasks; their manifest rows arrive in any order.
    manifest = (land_events(applier, events[3:], directory="r2", part=1)
                + land_events(applier, events[:3], directory="r1", part=0))[::-1]
    report = applier.apply_manifest(manifest, 5, {"file": "mysql-bin.000001", "pos": 450})
    by_table = {name: (batch, offset, staged) for name, batch, offset, staged in applier.sink.applied}
    batch, offset, staged_a = by_table["shop.a"]
    assert batch == EPOCH_SPAN + 5 and offset == {"file": "mysql-bin.000001", "pos": 450}
    final = {(r["ID"], r["_REPLICATOR_OP"]): r["NAME"] for r in staged_a}
    assert final == {(1, "u"): "v3", (2, "d"): "k", (3, "c"): "k"}
    _, _, staged_b = by_table["shop.b"]
    assert [(r["ID"], r["_REPLICATOR_OP"]) for r in staged_b] == [(7, "d")]
    assert {t.table: t.changes for t in report.tables} == {"shop.a": 4, "shop.b": 2}


def test_ddl_that_cannot_be_followed_stops_with_the_remedy(applier):
    ddl = SchemaChange(database="shop", sql="TRUNCATE TABLE a", kind="truncate",
                       tables=("shop.a",), position=BinlogPosition("mysql-bin.000001", 90))
    with pytest.raises(EngineError) as stopped:
        applier.apply_manifest(land_events(applier, [ddl]), 0, None)
    assert "TRUNCATE TABLE" in stopped.value.message
    assert "schema_changes.truncate` is stop" in stopped.value.hint
    assert "--snapshot always" in stopped.value.hint
    assert applier.sink.applied == []
    # key_change: recopy (the default) of a table merged by MySQL's key stops the query at
    # the batch, nothing of it applied: the runner re-plans, queues the copy and streams on
    # with the new key. (A key the YAML declares is kept: nothing to do.)
    plan = dataclasses.replace(applier.plan, tables=tuple(
        dataclasses.replace(t, key_origin="primary key") for t in applier.plan.tables))
    keyed = BatchApplier(applier.pipeline, plan, RecordingSink(), applier.checkpoint, epoch=1)
    key = SchemaChange(database="shop", sql="ALTER TABLE a DROP PRIMARY KEY", kind="alter",
                       tables=("shop.a",), position=BinlogPosition("mysql-bin.000001", 90))
    with pytest.raises(KeyChanged) as changed:
        keyed.apply_manifest(land_events(keyed, [key]), 0, None)
    assert changed.value.tables == ("shop.a",)
    assert keyed.sink.applied == []
    applier.apply_manifest(land_events(applier, [key]), 1, None)  # declared: streams on
    other = SchemaChange(database="shop", sql="ALTER TABLE other DROP COLUMN name", kind="alter",
                         tables=("shop.other",), position=BinlogPosition("mysql-bin.000001", 90))
    # DDL on a table the pipeline does not replicate
    applier.apply_manifest(land_events(applier, [other]), 1, None)


def test_ignore_policies_log_the_change_and_stream_on(tmp_path):
    import dataclasses

    from replicator.model.pipeline import SchemaChangePolicy

    pipeline = dataclasses.replace(_pipeline(), schema_changes=SchemaChangePolicy(
        truncate="ignore", drop_table="ignore", key_change="ignore"))
    plan = build_plan(pipeline, offline_catalog(pipeline))
    notices: list[str] = []
    applier = BatchApplier(pipeline, plan, RecordingSink(), CheckpointDir(tmp_path), epoch=1,
                           on_notice=notices.append)
    ddl = [SchemaChange(database="shop", sql=sql, kind=kind, tables=("shop.a",),
                        position=BinlogPosition("mysql-bin.000001", 90 + n))
           for n, (sql, kind) in enumerate([
               ("TRUNCATE TABLE a", "truncate"),
               ("ALTER TABLE a DROP PRIMARY KEY, ADD PRIMARY KEY (id, name)", "alter"),
               ("DROP TABLE a", "drop")])]
    events = [_row("shop.a", "c", 200, 0, None, {"id": 1, "name": "kept"})]
    applier.apply_manifest(land_events(applier, [*ddl, *events]), 0, None)
    (_, _, _, rows), = applier.sink.applied
    assert rows[0]["NAME"] == "kept"
    ignored = [n for n in notices if "ignored (schema_changes policy)" in n]
    assert len(ignored) == 4, notices  # TRUNCATE, the two key actions, DROP TABLE
    assert applier.plan is plan  # nothing re-planned
