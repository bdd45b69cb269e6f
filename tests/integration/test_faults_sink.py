"""Fault: the target fails in the middle of a batch, inside the sink's transaction: before
the MERGE (loading staging) or after it (writing the state row, before COMMIT). A few
failures are retried with backoff and the run finishes; a failure that persists stops the run
with a clear message, and the target holds no part of the failed batch.

The failure is injected into the DuckDB connection the real sink runs on (a proxy raising
duckdb's own IOException for chosen statements), so the sink's rollback and error sorting are
the code under test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.errors import SinkError
from replicator.model.pipeline import DuckDBTarget
from replicator.verify import verify_pipeline
from tests.integration.e2e_support import demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def before_merge(sql: str) -> bool:
    return "read_parquet" in sql  # loading the staging table


def after_merge(sql: str) -> bool:
    return sql.lstrip().upper().startswith("INSERT") and "_REPLICATOR_STATE" in sql


class _Injector:
    def __init__(self, fail_on: Any, times: int | None) -> None:
        self.fail_on, self.times, self.injected = fail_on, times, 0

    def check(self, sql: str) -> None:
        import duckdb

        if self.fail_on(sql) and (self.times is None or self.injected < self.times):
            self.injected += 1
            raise duckdb.IOException("injected: the disk went away")


class _Cursor:
    def __init__(self, inner: Any, injector: _Injector) -> None:
        self._inner, self._injector = inner, injector

    def execute(self, sql: str, *args: Any) -> Any:
        self._injector.check(sql)
        return self._inner.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Connection:
    def __init__(self, inner: Any, injector: _Injector) -> None:
        self._inner, self._injector = inner, injector

    def cursor(self) -> _Cursor:
        return _Cursor(self._inner.cursor(), self._injector)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _inject(monkeypatch: pytest.MonkeyPatch, warehouse: Path, injector: _Injector) -> None:
    import duckdb

    import replicator.sink
    from replicator.sink.duckdb import DuckDBSink

    def open_failing_sink(pipeline: Any, plan: Any) -> DuckDBSink:
        connection = _Connection(duckdb.connect(str(warehouse)), injector)
        return DuckDBSink(pipeline, plan, connection=connection)

    monkeypatch.setattr(replicator.sink, "open_sink", open_failing_sink)


def _replicated(mariadb: Any, database: str, workdir: Path, spark: Any) -> tuple[Any, Path]:
    with mariadb.root_connection() as root:
        create_schema(root, database)
        seed(root, database, customers=20, orders=100, awkward=20)
    warehouse = workdir / "warehouse.duckdb"
    pipeline = demo_pipeline(mariadb.source(), database, workdir, DuckDBTarget(str(warehouse)),
                             name="faults-sink", max_rows=100)
    run(pipeline, spark)
    with mariadb.root_connection() as root:
        apply_changes(root, database, rounds=20)
    return pipeline, warehouse


def _dump(warehouse: Path) -> dict[str, list]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as target:
        return {table: target.execute(f'SELECT * FROM main."{table}" ORDER BY ALL').fetchall()
                for table in ("CUSTOMERS", "ORDERS", "AWKWARD", "_REPLICATOR_STATE")}


def test_a_few_failures_mid_batch_are_retried(mariadb, fresh_database, tmp_path, spark,
                                               monkeypatch):
    pipeline, warehouse = _replicated(mariadb, fresh_database, tmp_path, spark)
    injector = _Injector(before_merge, times=2)
    _inject(monkeypatch, warehouse, injector)
    notices: list[str] = []
    result = run(pipeline, spark, on_notice=notices.append)
    assert injector.injected == 2
    retried = [n for n in notices if n.startswith("transient error")]
    assert len(retried) == 2 and "injected: the disk went away" in retried[0], notices
    assert result.changes > 0
    monkeypatch.undo()
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())


def test_a_persistent_failure_stops_cleanly_and_leaves_no_half_batch(
    mariadb, fresh_database, tmp_path, spark, monkeypatch
):
    pipeline, warehouse = _replicated(mariadb, fresh_database, tmp_path, spark)
    before = _dump(warehouse)
    injector = _Injector(after_merge, times=None)  # the MERGE ran, its COMMIT never comes
    _inject(monkeypatch, warehouse, injector)
    with pytest.raises(SinkError) as stopped:
        run(pipeline, spark)
    assert injector.injected >= 2  # retried before giving up
    assert "injected: the disk went away" in stopped.value.message
    assert "apply batch" in stopped.value.message and stopped.value.hint
    monkeypatch.undo()
    assert _dump(warehouse) == before  # every MERGE of the failed batches was rolled back
    assert not verify_pipeline(pipeline).equal  # the changes are still to be applied
    run(pipeline, spark)
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())
