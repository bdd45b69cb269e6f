"""An error raised on a Spark executor reaches the user as the ReplicatorError it was: its own
message, its specific hint and transient flag, not Spark's text with a generic hint and not a
PythonException traceback. Both executor paths: the snapshot's chunk reads and the stream."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from replicator.errors import SourceError
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from tests.integration.e2e_support import run

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

ZERO_DATE_HINT = "set source.mysql.zero_dates: as_null"


def _pipeline(source, database: str, workdir: Path) -> Pipeline:
    return Pipeline(
        name="zero-dates",
        source=dataclasses.replace(source, zero_dates="error"),
        target=TargetConfig(DuckDBTarget(str(workdir / "warehouse.duckdb"))),
        tables=(TablePipeline(database, "events"),),
        batching=BatchPolicy(max_rows=100, max_delay_ms=200),
        engine=EngineConfig(checkpoint=str(workdir / "checkpoint")),
    )


def _events(mariadb, database: str, *, zero_date: bool) -> None:
    with mariadb.root_connection(database) as root, root.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = ''")  # lets a zero date in
        cursor.execute("CREATE TABLE IF NOT EXISTS events (id INT PRIMARY KEY, at DATETIME)")
        cursor.execute("INSERT INTO events VALUES (1, '2024-01-02 03:04:05')")
        if zero_date:
            cursor.execute("INSERT INTO events VALUES (2, '0000-00-00 00:00:00')")


def _assert_the_zero_date_error(error: BaseException, spark) -> None:
    assert type(error) is SourceError, repr(error)
    assert "events.at holds a zero date" in error.message, error.message
    assert ZERO_DATE_HINT in (error.hint or ""), error.hint
    assert "Traceback" not in error.message and "\n" not in error.message
    assert not error.transient
    # Spark's own report of the failed task (a Java stack around a Python traceback) is off.
    log4j = spark.sparkContext._jvm.org.apache.logging.log4j
    for name in ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager"):
        assert str(log4j.LogManager.getLogger(name).getLevel()) == "OFF"


def test_a_snapshot_chunk_error_keeps_its_hint(mariadb, mysql_source, fresh_database, spark,
                                              tmp_path):
    _events(mariadb, fresh_database, zero_date=True)
    with pytest.raises(SourceError) as failed:
        run(_pipeline(mysql_source, fresh_database, tmp_path), spark)
    _assert_the_zero_date_error(failed.value, spark)


def test_a_stream_error_keeps_its_hint(mariadb, mysql_source, fresh_database, spark, tmp_path):
    _events(mariadb, fresh_database, zero_date=False)
    pipeline = _pipeline(mysql_source, fresh_database, tmp_path)
    assert run(pipeline, spark).snapshot_rows == 1
    with mariadb.root_connection(fresh_database) as root, root.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = ''")
        cursor.execute("INSERT INTO events VALUES (2, '0000-00-00 00:00:00')")
    with pytest.raises(SourceError) as failed:
        run(pipeline, spark)
    _assert_the_zero_date_error(failed.value, spark)
