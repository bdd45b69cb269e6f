"""End to end into Snowflake as users run it: the CLI as a subprocess, the real connector over
HTTP to fakesnow's server, configured only by a connections.toml (``SNOWFLAKE_HOME``).

No patching anywhere: `replicator check`, `run --until-caught-up` (snapshot, then stream with
an added column), `status` and `verify` run as processes; the target is read back through the
connector and compared with the source row by row (awkward values: quotes, emoji,
DECIMAL(38,10), DATETIME(6), BIGINT UNSIGNED max, JSON, BLOB, ENUM/SET/BIT, zero dates).
"""

from __future__ import annotations

import json
from pathlib import Path

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

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

def _pipeline_yaml(database: str) -> str:
    return demo_pipeline_yaml("e2e-snow-server", database, target=SNOWFLAKE_TARGET)


def test_cli_snapshot_and_stream_through_the_connector(fakesnow_server, fakesnow_database,
                                                       mariadb, mysql_source, fresh_database,
                                                       tmp_path):
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=20, orders=120, awkward=40)
    pipeline_file = tmp_path / "snow.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database))
    env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path)

    ok(replicator("check", str(pipeline_file), env=env))
    first = ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    apply_changes(root, fresh_database, rounds=10)
    with root.cursor() as cursor:
        cursor.execute(f"ALTER TABLE `{fresh_database}`.orders ADD COLUMN note VARCHAR(50)")
        cursor.execute(f"UPDATE `{fresh_database}`.orders SET note = 'it''s new 😀' WHERE id < 30")
    ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))

    pipeline = load_pipeline(pipeline_file, environ=env)
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
        cursor = connection.cursor()
        cursor.execute('SELECT COUNT(*), COUNT(DISTINCT "ID") FROM "RAW"."ORDERS"')
        total, distinct = cursor.fetchone()
        assert total == distinct > 120
        cursor.execute('SELECT COUNT(*) FROM "RAW"."ORDERS" WHERE "NOTE" = \'it\'\'s new 😀\'')
        assert cursor.fetchone()[0] > 0

    ok(replicator("verify", str(pipeline_file), env=env))  # exit 0: every table equal
    # --stopped-ok: a caught-up `--until-caught-up` pipeline is healthy while stopped.
    status = json.loads(ok(replicator("status", str(pipeline_file), "--format", "json",
                                      "--stopped-ok", env=env)).stdout)
    assert status["problems"] == [] and status["position"] == status["head"]
    assert all(table["batch_id"] is not None for table in status["tables"])

    # Nothing new: a run applies nothing (every batch id is in the state table already).
    again = ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
    assert first.returncode == again.returncode == 0
    with fakesnow_server.connect(fakesnow_database, "RAW") as connection:
        assert_target_equals_source(pipeline, root, connection)
    root.close()


def test_wrong_password_and_unknown_account_are_our_message(fakesnow_server, fakesnow_database,
                                                            mariadb, mysql_source,
                                                            fresh_database, tmp_path):
    with mariadb.root_connection() as root:
        create_schema(root, fresh_database)
    pipeline_file = tmp_path / "snow.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database))
    for command, connection, expected in (
        ("check", {"password": "not-the-password"}, "password"),
        ("run", {"password": "not-the-password"}, "password"),
        ("check", {"account": "no-such-account"}, "account"),
    ):
        env = cli_environment(fakesnow_server, fakesnow_database, mysql_source, tmp_path,
                              **connection)
        result = replicator(command, str(pipeline_file), *(["--until-caught-up"]
                            if command == "run" else []), env=env, timeout=300)
        output = result.stdout + result.stderr
        assert result.returncode != 0, output
        assert "Traceback" not in output and "snowflake.connector" not in output, output
        label = "fix:" if command == "check" else "hint:"
        assert label in output and expected in output.split(label, 1)[1].lower(), output
        assert "not-the-password" not in output
