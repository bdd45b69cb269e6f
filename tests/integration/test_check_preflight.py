"""``replicator check`` against real servers: pass on the test server, the fix named on
misconfigured ones (binlog off, STATEMENT format, short retention, missing grants)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from replicator.cli.check import run_checks
from replicator.cli.main import app
from replicator.model.pipeline import (
    DuckDBTarget,
    EngineConfig,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.source.preflight import CheckResult
from replicator.source.throwaway import ThrowawayMariaDB

pytestmark = pytest.mark.mysql


def pipeline_for(source, tables, tmp_path, **source_overrides):
    return Pipeline(
        name="check-test",
        source=source,
        target=TargetConfig(warehouse=DuckDBTarget(path=str(tmp_path / "w.duckdb"))),
        tables=tuple(tables),
        engine=EngineConfig(checkpoint=str(tmp_path / "ckpt")),
    )


def by_check(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


@pytest.fixture
def shop(mariadb, fresh_database):
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(10,2))")
        cursor.execute("CREATE TABLE nokey (x INT)")
    return fresh_database


def test_well_configured_server_passes(mariadb, mysql_source, shop, tmp_path):
    pipeline = pipeline_for(mysql_source, [TablePipeline(shop, "orders")], tmp_path)
    results = by_check(run_checks(pipeline, check_target=False))
    failing = {k: (r.detail, r.fix) for k, r in results.items() if r.status != "pass"}
    assert failing == {}
    assert set(results) >= {"connect", "log_bin", "binlog_format", "binlog_row_image",
                            "binlog_row_metadata", "binlog retention", "grants", "server_id",
                            f"table {shop}.orders"}


def test_table_problems_name_the_fix(mysql_source, shop, tmp_path):
    from replicator.model.pipeline import ColumnMapping

    pipeline = pipeline_for(mysql_source, [
        TablePipeline(shop, "nokey"),
        TablePipeline(shop, "missing"),
        # A binding entry (a pin, source_type only, is a stale entry: a warning, see
        # test_init_refresh.py).
        TablePipeline(shop, "orders", columns=(ColumnMapping("nope", mask="md5"),)),
        TablePipeline(shop, "nokey", key=("x",)),
    ], tmp_path)
    results = run_checks(pipeline, check_target=False)
    tables = [r for r in results if r.check.startswith("table ")]
    assert [r.status for r in tables] == ["fail", "fail", "fail", "pass"]
    assert "key: [column" in tables[0].fix
    assert "does not exist" in tables[1].detail
    assert "'nope'" in tables[2].detail


def test_missing_grant_names_the_grant(mariadb, shop, tmp_path):
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("CREATE USER IF NOT EXISTS 'selectonly'@'%' IDENTIFIED BY 'pw'")
        cursor.execute(f"GRANT SELECT ON `{shop}`.* TO 'selectonly'@'%'")
    source = mariadb.source(user="selectonly", password="pw")
    results = by_check(run_checks(pipeline_for(source, [TablePipeline(shop, "orders")], tmp_path),
                                  check_target=False))
    assert results["grants"].status == "fail"
    assert "REPLICATION SLAVE" in results["grants"].detail
    assert results["grants"].fix == (
        "GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO 'selectonly'@'%';")


def test_wrong_password_fails_connect(mariadb, shop, tmp_path):
    source = mariadb.source(password="wrong")
    results = run_checks(pipeline_for(source, [TablePipeline(shop, "orders")], tmp_path))
    assert results[0].check == "connect" and results[0].status == "fail"
    assert "GRANT" in results[0].fix


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra_args", "check", "fix_names"),
    [
        (["--skip-log-bin"], "log_bin", "log-bin=mysql-bin"),
        (["--binlog-format=STATEMENT"], "binlog_format", "binlog_format = ROW"),
        (["--binlog-row-image=MINIMAL"], "binlog_row_image", "binlog_row_image = FULL"),
        (["--binlog-row-metadata=MINIMAL"], "binlog_row_metadata", "binlog_row_metadata = FULL"),
        (["--expire-logs-days=1"], "binlog retention", "binlog_expire_logs_seconds"),
    ],
)
def test_misconfigured_server_fails_with_the_fix(extra_args, check, fix_names, tmp_path):
    with ThrowawayMariaDB(extra_args=extra_args) as server:
        pipeline = pipeline_for(server.source(), [], tmp_path)
        result = by_check(run_checks(pipeline, check_target=False))[check]
    assert result.status == ("warn" if check == "binlog retention" else "fail")
    assert fix_names in result.fix


def test_cli_json_and_exit_code(mariadb, mysql_source, shop, tmp_path, monkeypatch):
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: cli-check\nsource:\n  mysql:\n    host: 127.0.0.1\n"
        f"    port: {mysql_source.port}\n    user: replicator\n    password: ${{MYSQL_PASSWORD}}\n"
        f"target:\n  duckdb: {{path: {tmp_path / 'w.duckdb'}}}\n"
        f"tables:\n  - source: {shop}.orders\n  - source: {shop}.nokey\n"
    )
    monkeypatch.setenv("MYSQL_PASSWORD", mysql_source.password)
    result = CliRunner().invoke(app, ["check", str(path), "--format", "json", "--skip-target"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    statuses = {c["check"]: c["status"] for c in report["checks"]}
    assert statuses[f"table {shop}.orders"] == "pass"
    assert statuses[f"table {shop}.nokey"] == "fail"
    assert report["ok"] is False
    text = CliRunner().invoke(app, ["check", str(path), "--skip-target"])
    assert "FAIL    table" in text.stdout and "fix: declare `key:" in text.stdout


def test_target_is_planned_and_prepared(mysql_source, shop, tmp_path):
    pipeline = pipeline_for(mysql_source, [TablePipeline(shop, "orders")], tmp_path)
    results = by_check(run_checks(pipeline))
    assert results["plan"].status == "pass", results["plan"]
    assert results["target"].status == "pass", results["target"]
    assert (tmp_path / "w.duckdb").exists()
