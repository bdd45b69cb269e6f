"""``engine.snapshot.absent_rows``: the keys a copy no longer finds in the source, as a change
batch of deletes, stage as the deletes of those keys always staged (ChangeEvents with only
their key in the before-image, through ``transform.change_batch``): no ChangeEvent on the way."""

from __future__ import annotations

import pytest

from replicator.engine.snapshot import absent_rows
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan
from replicator.source.arrow_types import change_batch_schema
from replicator.transform import change_batch, stage_batch
from replicator.transform.stage import batch_key
from tests.fixtures.sink_sample import BIGINT_UNSIGNED_MAX, CATALOG, sample_pipeline

POSITION = BinlogPosition("mysql-bin.000009", 4321)
KEYS = {
    "shop.Order Items": [{"id": 1}, {"id": BIGINT_UNSIGNED_MAX}, {"id": 0}],
    "shop.regions": [{"region": "EU", "id": 1}, {"region": "Zürich ' \"", "id": -5}],
}


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("target", ["duckdb", "snowflake"])
def test_absent_keys_stage_as_the_deletes_of_those_keys(name, target) -> None:
    table_plan = build_plan(sample_pipeline(target), CATALOG).table(name)
    source = CATALOG.table(*name.split(".", 1))
    keys = KEYS[name]
    batch = absent_rows(source, keys, POSITION)
    assert batch.schema == change_batch_schema(source, before=False)
    events = [ChangeEvent(table=source.name, op="d", position=POSITION, row_index=index, ts_ms=0,
                          before=dict(key)) for index, key in enumerate(keys)]
    columns = [(c.name, c.mysql_type) for c in source.columns]
    expected = stage_batch(table_plan, change_batch(events, columns, batch_key(table_plan)))
    staged = stage_batch(table_plan, batch)
    assert staged.num_rows == len(keys)
    assert staged.to_pylist() == expected.to_pylist()
