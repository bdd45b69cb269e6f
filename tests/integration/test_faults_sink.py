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
from tests.integration.e2e_support import SNOWFLAKE_TARGET, demo_pipeline, demo_pipeline_yaml, run

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
    # The sink's own retries (the same batch again on the spot) without real waiting.
    monkeypatch.setenv("REPLICATOR_SINK_RETRY_DELAYS", "0.1,0.1,0.1")


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
    # Retried by the sink, batch by batch: the stream was not restarted for it.
    assert all(" again in 0.1 s" in n for n in retried), notices
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
    assert injector.injected >= 4  # the sink's 3 retries, then the engine's restarts
    assert "injected: the disk went away" in stopped.value.message
    assert "apply batch" in stopped.value.message and stopped.value.hint
    monkeypatch.undo()
    assert _dump(warehouse) == before  # every MERGE of the failed batches was rolled back
    assert not verify_pipeline(pipeline).equal  # the changes are still to be applied
    run(pipeline, spark)
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())


# -- Snowflake: the connection is lost mid-batch ----------------------------------------------

def _pipeline_yaml(database: str) -> str:
    return demo_pipeline_yaml("faults-snow", database, target=SNOWFLAKE_TARGET,
                              batching="{max_rows: 60, max_delay: 200ms}")


@pytest.mark.parametrize("lost", ["connection", "session"])
def test_a_lost_snowflake_connection_mid_batch_is_retried_with_the_same_batch_id(
    lost, fakesnow_server, fakesnow_database, mariadb, mysql_source, fresh_database, tmp_path
):
    """The CLI runs against fakesnow's server; when the first stream batch has loaded its
    staging (its COPY arrives), the server stops for 3 s and starts again on the same port.
    ``connection``: the sessions survive, the connector retries its requests itself.
    ``session``: the restart also ends every session (HTTP 401): the sink sorts that as
    transient, the run restarts the query from its checkpoint and the sink applies the same
    batch id on a new session. Either way the run finishes on its own, every batch is
    applied once, and the target equals the source."""
    import threading

    from replicator.config import load_pipeline
    from tests.integration.e2e_support import (
        assert_target_equals_source,
        cli_environment,
        ok,
        replicator,
    )

    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=20, orders=100, awkward=20)
    pipeline_file = tmp_path / "faults-snow.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))  # the snapshot
    apply_changes(root, fresh_database, rounds=20)

    bounced: list[threading.Thread] = []
    copies_before = sum(sql.startswith("COPY INTO") for sql in fakesnow_server.queries)

    def lose_the_connection(sql: str) -> None:
        if sql.startswith("COPY INTO") and not bounced:
            copies = sum(q.startswith("COPY INTO") for q in fakesnow_server.queries)
            if copies > copies_before:  # a stream batch, staging just loaded
                bounced.append(fakesnow_server.restart_after(
                    3.0, drop_sessions=lost == "session"))

    logins_before = fakesnow_server.logins
    fakesnow_server.on_query = lose_the_connection
    try:
        result = replicator("run", str(pipeline_file), "--until-caught-up", env=env,
                            timeout=600)
    finally:
        fakesnow_server.on_query = None
        for thread in bounced:
            thread.join(timeout=60)
        if not fakesnow_server.running:
            fakesnow_server.start()
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert bounced, "the server was never stopped mid-batch"
    assert "Traceback" not in output
    if lost == "session":  # our retry: a transient error, a new login, the batch again
        assert "transient error" in output and "401" in output, output[-4000:]
        assert fakesnow_server.logins >= logins_before + 2

    pipeline = load_pipeline(pipeline_file, environ=env)
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
        cursor = connection.cursor()
        cursor.execute('SELECT "TABLE", "BATCH_ID", COUNT(*) FROM "RAW"."_REPLICATOR_STATE" '
                       'GROUP BY 1, 2 HAVING COUNT(*) > 1')
        assert cursor.fetchall() == []  # every batch id recorded once
        for table in ("CUSTOMERS", "ORDERS", "AWKWARD"):
            cursor.execute(f'SELECT COUNT(*), COUNT(DISTINCT "ID") FROM "RAW"."{table}"')
            total, distinct = cursor.fetchone()
            assert total == distinct, table
    root.close()
