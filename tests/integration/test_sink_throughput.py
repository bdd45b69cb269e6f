"""One 100k-change MERGE into DuckDB and into fakesnow: prints the numbers (no timing asserts).

    .venv/bin/python -m pytest -q -s -m slow tests/integration/test_sink_throughput.py
"""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pytest

from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import (
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan
from replicator.sink import open_sink
from tests.fixtures.row_transforms import stage_events

pytestmark = pytest.mark.slow
CHANGES = 100_000
COLUMNS = [("id", "bigint(20)"), ("customer", "varchar(64)"), ("amount", "decimal(12,2)"),
           ("status", "enum('new','paid','shipped')"), ("created", "datetime(6)"),
           ("updated", "timestamp(6)"), ("note", "text"), ("qty", "int(11)")]
CATALOG = Catalog(tables=(SourceTable(
    "shop", "orders",
    tuple(SourceColumn(n, MySQLType.parse(t), nullable=n != "id", ordinal=i)
          for i, (n, t) in enumerate(COLUMNS, 1)),
    primary_key=("id",)),))


def row(i: int, version: int) -> dict:
    return {"id": i, "customer": f"customer {i % 977}", "amount": Decimal(f"{i % 10000}.{version:02d}"),
            "status": ("new", "paid", "shipped")[version % 3],
            "created": dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i),
            "updated": dt.datetime(2024, 6, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=version),
            "note": None if i % 5 else "a note with 'quotes'", "qty": i % 100}


def events(start: int, count: int, version: int) -> list[ChangeEvent]:
    """count changes: 70% updates of existing rows, 20% inserts, 10% deletes."""
    out = []
    for n in range(count):
        i = start + n
        kind = n % 10
        if kind < 7:
            op, before, after = "u", row(i, version - 1), row(i, version)
        elif kind < 9:
            op, before, after = "c", None, row(i + 10_000_000, version)
        else:
            op, before, after = "d", row(i, version - 1), None
        out.append(ChangeEvent("shop.orders", op, BinlogPosition("mysql-bin.000001", 4 + n // 5),
                               n % 5, 1_700_000_000_000, before=before, after=after))
    return out


def measure(target_kind: str, warehouse) -> str:
    pipeline = Pipeline(name="bench", source=MySQLSource(),
                        target=TargetConfig(warehouse=warehouse),
                        tables=(TablePipeline("shop", "orders"),))
    plan = build_plan(pipeline, CATALOG)
    table = plan.tables[0]
    sink = open_sink(pipeline, plan)
    sink.prepare()
    snapshot = [ChangeEvent("shop.orders", "r", BinlogPosition("mysql-bin.000001", 4), i, 0,
                            after=row(i, 0)) for i in range(CHANGES)]
    sink.apply(table, -1, {}, stage_events(table, snapshot))
    changes = events(0, CHANGES, 1)
    started = time.perf_counter()
    staged = stage_events(table, changes)
    staging_seconds = time.perf_counter() - started
    result = sink.apply(table, 1, {"file": "mysql-bin.000001", "pos": 1}, staged)
    sink.close()
    total = staging_seconds + result.seconds_stage + result.seconds_merge
    return (f"{target_kind}: {CHANGES} changes into a {CHANGES}-row table: "
            f"stage_batch {staging_seconds:.2f} s, load staging {result.seconds_stage:.2f} s, "
            f"MERGE+state+commit {result.seconds_merge:.2f} s, "
            f"total {total:.2f} s = {CHANGES / total:,.0f} changes/s")


def test_duckdb_100k_merge(tmp_path, capsys):
    line = measure("duckdb", DuckDBTarget(path=str(tmp_path / "bench.duckdb")))
    with capsys.disabled():
        print("\n" + line)
    assert "changes/s" in line


def test_fakesnow_100k_merge(capsys):
    fakesnow = pytest.importorskip("fakesnow")
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        line = measure("fakesnow", SnowflakeTarget(database="DB", schema="S", account="fake",
                                                   user="fake", password="fake"))
    with capsys.disabled():
        print("\n" + line)
    assert "changes/s" in line
