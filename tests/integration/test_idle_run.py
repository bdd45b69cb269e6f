"""A bounded run with nothing to apply starts no JVM (issue 30, start-up), and one that has
work -- new changes, a re-copy asked with `replicator snapshot --table` -- still does it.

Real CLI subprocesses (the idle path is only taken when the run starts its own Spark)."""

from __future__ import annotations

import duckdb
import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from tests.integration.e2e_support import (
    assert_target_equals_source,
    cli_environment,
    demo_pipeline_yaml,
    ok,
    replicator,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

IDLE = "nothing to apply, Spark not started"


def test_a_caught_up_run_starts_no_spark_and_a_run_with_work_does(
        fakesnow_server, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=30, awkward=10)
    path = tmp_path / "p.yaml"
    path.write_text(demo_pipeline_yaml("idle", fresh_database))
    env = cli_environment(fakesnow_server, fresh_database, mysql_source, tmp_path)
    pipeline = load_pipeline(path, environ=env)

    def target_equals_source():
        with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
            assert_target_equals_source(pipeline, root, target)

    first = ok(replicator("run", str(path), "--until-caught-up", env=env))
    assert IDLE not in first.stdout + first.stderr
    target_equals_source()

    idle = ok(replicator("run", str(path), "--until-caught-up", env=env))
    assert IDLE in idle.stdout + idle.stderr, idle.stdout + idle.stderr
    assert "SparkSession" not in idle.stderr and "Ivy" not in idle.stderr
    target_equals_source()

    # New changes, and drift behind the binlog's back with a re-copy asked while no run
    # follows: the next run must start Spark, stream the changes and copy the table.
    apply_changes(root, fresh_database, rounds=5)
    with root.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"UPDATE `{fresh_database}`.customers SET name = 'drifted' LIMIT 3")
        cursor.execute("SET SESSION sql_log_bin = 1")
    root.commit()
    ok(replicator("snapshot", str(path), "--table", f"{fresh_database}.customers", env=env))
    copied = ok(replicator("run", str(path), "--until-caught-up", env=env))
    assert IDLE not in copied.stdout + copied.stderr
    target_equals_source()
