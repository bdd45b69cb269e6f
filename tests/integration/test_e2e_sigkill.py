"""`kill -9` of `replicator run` in the middle of streaming loses nothing and duplicates nothing.

The run is a real subprocess (`python -m replicator run FILE`) on a workload that keeps
writing; it is killed once Spark has committed a few micro-batches (so mid-stream, most likely
mid-batch too), then `--until-caught-up` finishes the job and the target equals the source.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from tests.integration.e2e_support import (
    SNOWFLAKE_TARGET,
    assert_target_equals_source,
    cli_environment,
    demo_pipeline_yaml,
    ok,
    replicator,
    run,
    sigkilled,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

def _pipeline_yaml(database: str, **target: str) -> str:
    return demo_pipeline_yaml("sigkill", database, batching="{max_rows: 40, max_delay: 200ms}",
                              **target)


def _commits(checkpoint: Path) -> int:
    try:
        return sum(1 for name in os.listdir(checkpoint / "stream" / "commits") if name.isdigit())
    except FileNotFoundError:
        return 0


def _kill_mid_run(root: Any, database: str, pipeline_file: Path, env: dict[str, str],
                  workdir: Path, killer: Callable[[subprocess.Popen], bool] | None = None) -> None:
    """Start `replicator run` on a workload that keeps writing; SIGKILL it once Spark has
    committed a few micro-batches, or once ``killer`` (given the process) says it killed it."""
    log = workdir / "run.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", str(pipeline_file), "--log-format", "json"],
            env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )
    killed = (lambda: killer(process)) if killer else (
        lambda: _commits(workdir / "checkpoint") >= 3)
    with sigkilled(process):
        deadline = time.monotonic() + 600  # JVM start-up alone takes minutes on a busy CI box
        round_number = 0
        while not killed():
            assert killer or process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            # A bounded workload (~300 changes, ~8 batches of 40), written once the stream
            # has started (the run says "streaming from"): written earlier, on a loaded
            # machine all of it lands before the snapshot, the stream finds nothing to read
            # and the third commit never comes.
            if "streaming from" in log.read_text() and round_number < 12:
                apply_changes(root, database, rounds=2, seed_value=round_number,
                              first_new_id=100_000 + 1000 * round_number)
                round_number += 1
            time.sleep(0.3)
        os.kill(process.pid, signal.SIGKILL)


def test_sigkill_mid_run_then_resume_converges(spark, mariadb, mysql_source, fresh_database,
                                               tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=30, orders=150, awkward=40)
    pipeline_file = tmp_path / "sigkill.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database))
    env = {
        **os.environ,
        "MYSQL_HOST": mysql_source.host,
        "MYSQL_PORT": str(mysql_source.port),
        "MYSQL_USER": mysql_source.user,
        "MYSQL_PASSWORD": mysql_source.password or "",
        "WORKDIR": str(tmp_path),
    }
    _kill_mid_run(root, fresh_database, pipeline_file, env, tmp_path)

    apply_changes(root, fresh_database, rounds=5, seed_value=99, first_new_id=900_000)
    pipeline = load_pipeline(pipeline_file, environ=env)
    resumed = run(pipeline, spark)
    assert resumed.changes > 0

    import duckdb

    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
        for table in ("CUSTOMERS", "ORDERS", "AWKWARD"):
            total, distinct = target.execute(
                f'SELECT COUNT(*), COUNT(DISTINCT "ID") FROM main."{table}"'
            ).fetchone()
            assert total == distinct, f"{table}: duplicate keys after the restart"

    # `replicator status` reads the same checkpoint and state table: caught up, no lag.
    from replicator.cli.status import collect_status

    status = collect_status(pipeline)
    assert status["problems"] == [] and status["position"] == status["head"]
    assert status["lag_bytes"] == 0 and status["snapshot"] == "done"
    assert all(table["batch_id"] is not None for table in status["tables"])
    root.close()


def test_sigkill_mid_run_into_snowflake_then_resume_converges(
    fakesnow_server, fakesnow_database, mariadb, mysql_source, fresh_database, tmp_path
):
    """The same against fakesnow's server through the real connector (connections.toml),
    killed inside a batch's transaction: after its MERGE, before its COMMIT. Its session
    lives on with that transaction open and holding its locks, as in Snowflake; the resumed
    run aborts it (else its first write would wait for Snowflake to give up on it), replays
    the uncommitted batch under the same id, and nothing is doubled."""
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=30, orders=150, awkward=40)
    pipeline_file = tmp_path / "sigkill.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database, target=SNOWFLAKE_TARGET))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    killed_at: list[str] = []

    def kill_inside_a_batch(process: subprocess.Popen) -> bool:
        def at_the_merge(sql: str) -> None:
            # The statement still runs: the server received it before its client died.
            if sql.startswith("MERGE") and _commits(tmp_path / "checkpoint") >= 2 and not killed_at:
                os.kill(process.pid, signal.SIGKILL)
                killed_at.append(sql)

        fakesnow_server.on_query = at_the_merge
        return bool(killed_at)

    aborted_before = len(fakesnow_server.sessions.aborted)
    try:
        _kill_mid_run(root, fresh_database, pipeline_file, env, tmp_path, kill_inside_a_batch)
    finally:
        fakesnow_server.on_query = None
    with fakesnow_server.connect(fakesnow_database, "RAW") as reader:
        left_open = reader.cursor().execute("SHOW TRANSACTIONS").fetchall()
    assert len(left_open) == 1, left_open  # the killed batch's, detached

    apply_changes(root, fresh_database, rounds=5, seed_value=99, first_new_id=900_000)
    resumed = ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    assert fakesnow_server.sessions.aborted[aborted_before:] == [int(left_open[0][0])]
    assert "left open in warehouse session" in resumed.stdout + resumed.stderr
    pipeline = load_pipeline(pipeline_file, environ=env)
    with fakesnow_server.connect(fakesnow_database, "RAW") as target:
        assert_target_equals_source(pipeline, root, target)
        cursor = target.cursor()
        for table in ("CUSTOMERS", "ORDERS", "AWKWARD"):
            cursor.execute(f'SELECT COUNT(*), COUNT(DISTINCT "ID") FROM "RAW"."{table}"')
            total, distinct = cursor.fetchone()
            assert total == distinct, f"{table}: duplicate keys after the restart"
        cursor.execute('SELECT COUNT(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                       '"RAW"."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING COUNT(*) > 1)')
        assert cursor.fetchone()[0] == 0

    # --stopped-ok: a caught-up `--until-caught-up` pipeline is healthy while stopped.
    status = json.loads(ok(replicator("status", str(pipeline_file), "--format", "json",
                                      "--stopped-ok", env=env)).stdout)
    assert status["problems"] == [] and status["position"] == status["head"]
    assert status["lag_bytes"] == 0 and status["snapshot"] == "done"
    root.close()
