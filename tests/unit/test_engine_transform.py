"""The per-batch transform: rows of the data source -> per table, compacted, under the right
batch id; DDL it cannot follow stops it. The sink here only records what it is handed."""

from __future__ import annotations

import pytest

from replicator.engine.checkpoint import EPOCH_SPAN, CheckpointDir
from replicator.engine.datasource import change_row
from replicator.engine.transform import BatchApplier
from replicator.errors import EngineError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan, offline_catalog
from replicator.sink import ApplyResult


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

    def apply(self, table, batch_id, end_offset, staged):
        self.applied.append((table.source_name, batch_id, end_offset, staged.to_pylist()))
        return ApplyResult(skipped=False, rows=staged.num_rows, seconds_stage=0.0, seconds_merge=0.0)


def _row(table, op, pos, index, before=None, after=None):
    event = ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000001", pos),
                        row_index=index, ts_ms=1000, before=before, after=after,
                        end_position=BinlogPosition("mysql-bin.000001", pos + 50))
    return change_row(event, ["id"])


@pytest.fixture()
def applier(tmp_path):
    pipeline = _pipeline()
    plan = build_plan(pipeline, offline_catalog(pipeline))
    return BatchApplier(pipeline, plan, RecordingSink(), CheckpointDir(tmp_path), epoch=1)


def test_a_batch_is_compacted_per_table_under_its_epoch_batch_id(applier):
    rows = [  # deliberately out of order: partitions may arrive in any order
        _row("shop.a", "u", 300, 0, {"id": 1, "name": "v2"}, {"id": 1, "name": "v3"}),
        _row("shop.a", "c", 100, 0, None, {"id": 1, "name": "v1"}),
        _row("shop.a", "u", 200, 0, {"id": 1, "name": "v1"}, {"id": 1, "name": "v2"}),
        _row("shop.b", "c", 100, 1, None, {"id": 7, "name": "x"}),
        _row("shop.b", "d", 400, 0, {"id": 7, "name": "x"}, None),
        _row("shop.a", "u", 400, 1, {"id": 2, "name": "k"}, {"id": 3, "name": "k"}),  # key change
    ]
    report = applier.apply_rows(rows, 5, {"file": "mysql-bin.000001", "pos": 450})
    by_table = {name: (batch, offset, staged) for name, batch, offset, staged in applier.sink.applied}
    batch, offset, staged_a = by_table["shop.a"]
    assert batch == EPOCH_SPAN + 5 and offset == {"file": "mysql-bin.000001", "pos": 450}
    final = {(r["ID"], r["_REPLICATOR_OP"]): r["NAME"] for r in staged_a}
    assert final == {(1, "u"): "v3", (2, "d"): "k", (3, "c"): "k"}
    _, _, staged_b = by_table["shop.b"]
    assert [(r["ID"], r["_REPLICATOR_OP"]) for r in staged_b] == [(7, "d")]
    assert {t.table: t.changes for t in report.tables} == {"shop.a": 4, "shop.b": 2}


def test_ddl_that_cannot_be_followed_stops_with_the_remedy(applier):
    ddl = {
        "table": "shop.a", "op": "ddl", "file": "mysql-bin.000001", "file_seq": 1, "pos": 90,
        "row_index": 0, "ts_ms": 0, "gtid": None, "transaction_id": None, "end_file": None,
        "end_pos": None, "key": None, "before": None,
        "after": '{"database": "shop", "sql": "ALTER TABLE a DROP COLUMN name", '
                 '"kind": "alter", "tables": ["shop.a"]}',
    }
    with pytest.raises(EngineError) as stopped:
        applier.apply_rows([ddl], 0, None)
    assert "DROP COLUMN" in stopped.value.message and "--snapshot always" in stopped.value.hint
    assert applier.sink.applied == []
    other = dict(ddl, after=ddl["after"].replace('"shop.a"', '"shop.other"'))
    applier.apply_rows([other], 1, None)  # DDL on a table the pipeline does not replicate
