"""``verify --repair`` while ``replicator run`` streams, into Snowflake as users run it (the
CLI as processes, the real connector over HTTP to fakesnow's server): 100 rows of ``orders``
drifted behind the binlog's back are found by checksum while a writer keeps changing the
tables, the streaming run copies them again between its batches, and afterwards the target
equals the source row by row and a second ``verify`` says equal.

(A DuckDB target cannot be verified while a run holds its file: DuckDB lets one process
open a database file for writing; docs/verify.md says what to do there.)"""

from __future__ import annotations

import json
import threading

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
)
from tests.integration.scaffolded_support import StreamingProcess
from tests.integration.verify_support import drift_behind_the_binlog

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_repair_while_the_run_streams_under_a_live_writer(
        fakesnow_server, fakesnow_database, mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=300, awkward=20)
    pipeline_file = tmp_path / "repair-live.yaml"
    pipeline_file.write_text(demo_pipeline_yaml("repair-live", fresh_database,
                                                target=SNOWFLAKE_TARGET))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)
    run = StreamingProcess(pipeline_file, env, tmp_path / "run.log")

    def poke() -> None:  # a change for a stream batch to show (a copy logs none)
        with root.cursor() as cursor:
            cursor.execute("UPDATE customers SET tier = IF(tier = 'pro', 'free', 'pro') "
                           "WHERE id = 1")

    try:
        run.caught_up(root, poke=poke)
        drift_behind_the_binlog(root, fresh_database)
        writer = threading.Thread(target=apply_changes, args=(
            mariadb.root_connection(fresh_database), fresh_database),
            kwargs={"rounds": 40, "seed_value": 5, "first_new_id": 100_000})
        writer.start()
        try:
            repaired = replicator("verify", str(pipeline_file), "--table", "orders",
                                  "--repair", "--wait", "180", "--format", "json", env=env)
        finally:
            writer.join()
        data = json.loads(repaired.stdout or "{}")
        (request,) = data["repair"]["requests"]
        # The drifted keys (the writer's own change to one repairs it through the binlog) and
        # any the stream had not applied yet when verify compared.
        assert request["keys"] > 0 and request["table"] == f"{fresh_database}.orders"
        assert data["tables"][0]["method"] == "checksum"
        assert repaired.returncode == 0, repaired.stdout[-3000:] + repaired.stderr[-3000:]
        run.said(r"re-copy of \S*orders.* done")
        run.caught_up(root, poke=poke)
        pipeline = load_pipeline(pipeline_file, environ=env)
        with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
            assert_target_equals_source(pipeline, root, connection)
        ok(replicator("verify", str(pipeline_file), env=env))  # every table equal
    finally:
        run.close()
        root.close()
