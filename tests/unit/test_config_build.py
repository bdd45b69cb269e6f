"""From YAML to the frozen ``Pipeline``: defaults, spellings, and errors as ``ConfigError``."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.errors import ConfigError, UsageError
from replicator.model.pipeline import DuckDBTarget, SnowflakeTarget, derive_server_id

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "My Pipeline.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


MINIMAL = "source: {mysql: {}}\ntarget: {duckdb: {}}\ntables:\n  - source: shop.trips\n"


def test_minimal_file_gets_every_default(tmp_path: Path) -> None:
    pipeline = load_pipeline(write(tmp_path, MINIMAL), environ={})
    assert pipeline.name == "my-pipeline"  # derived from the file name
    assert pipeline.server_id == derive_server_id("my-pipeline")
    assert pipeline.source.host == "127.0.0.1" and pipeline.source.port == 3306
    assert pipeline.source.start.kind == "initial"
    assert pipeline.target.warehouse == DuckDBTarget()
    assert pipeline.batching.max_rows == 50_000 and pipeline.batching.max_delay_ms == 10_000
    [table] = pipeline.tables
    assert (table.source_database, table.source_table) == ("shop", "trips")
    assert table.key is None and table.target_table is None and table.batching is None
    assert table.metadata == ("op", "ts", "synced_at") and table.deletes == "hard"
    assert pipeline.checkpoint_dir == ".replicator/my-pipeline"


def test_trips_example(tmp_path: Path) -> None:
    pipeline = load_pipeline(ROOT / "pipelines" / "trips.yaml",
                             environ={"MYSQL_PASSWORD": "pw", "MYSQL_PORT": "3307"})
    assert pipeline.name == "trips" and pipeline.server_id == 4201
    assert pipeline.source.password == "pw" and pipeline.source.port == 3307
    assert isinstance(pipeline.target.warehouse, SnowflakeTarget)
    assert pipeline.target.warehouse.connection == "default"
    table = pipeline.table("shop.trips")
    assert table.target_table == "DRIVER_TRIPS" and table.key == ("TRIPID",)
    driver = table.mapping_for("driverid")
    assert driver is not None
    assert (driver.target_column, driver.target_type, driver.source_type) == (
        "DRIVER_ID", "VARCHAR", "int")


def test_shop_orders_example() -> None:
    pipeline = load_pipeline(ROOT / "pipelines" / "shop_orders.yaml", environ={})
    table = pipeline.tables[0]
    assert table.key == ("order_id", "line_no") and table.deletes == "soft"
    assert table.mapping_for("customer_email").mask == "sha256"
    assert table.mapping_for("password_hash").exclude is True
    assert table.filter == "status <> 'test'"
    assert "position" in table.metadata
    # the per-table override keeps the pipeline's max_delay
    assert pipeline.batching_for(table).max_rows == 1000
    assert pipeline.batching_for(table).max_delay_ms == 2000


def test_spellings_map_to_the_model(tmp_path: Path) -> None:
    text = """
name: x
source:
  mysql:
    start: {file: mysql-bin.000003, pos: 1234}
    zero_dates: error
    connect_timeout: 250ms
    password: ""
target:
  snowflake: {database: D, schema: S, token: "${TOKEN:-}"}
defaults: {deletes: soft, metadata: [op]}
batching: {max_delay: 2m}
tables:
  - source: a.b
    columns:
      c: {mask: as_null}
  - source: a.c
    deletes: hard
    metadata: []
"""
    pipeline = load_pipeline(write(tmp_path, text), environ={})
    start = pipeline.source.start
    assert (start.kind, start.file, start.pos) == ("position", "mysql-bin.000003", 1234)
    assert pipeline.source.zero_dates == "error"
    assert pipeline.source.connect_timeout_s == 0.25
    assert pipeline.source.password is None
    assert pipeline.target.warehouse.token is None  # unset ${TOKEN:-} is "not given"
    assert pipeline.batching.max_delay_ms == 120_000
    first, second = pipeline.tables
    assert first.deletes == "soft" and first.metadata == ("op",)
    assert first.columns[0].mask == "null"
    assert second.deletes == "hard" and second.metadata == ()


@pytest.mark.parametrize(("start", "kind"), [("latest", "latest"), ("{gtid: 0-1-100}", "gtid")])
def test_start_forms(tmp_path: Path, start: str, kind: str) -> None:
    text = MINIMAL.replace("{mysql: {}}", f"{{mysql: {{start: {start}}}}}")
    assert load_pipeline(write(tmp_path, text), environ={}).source.start.kind == kind


def test_invalid_file_raises_config_error_with_every_error(tmp_path: Path) -> None:
    text = MINIMAL + "    deletes: sofft\nbatching: {max_rows: '5'}\n"
    with pytest.raises(ConfigError) as caught:
        load_pipeline(write(tmp_path, text), environ={})
    codes = sorted(d.code for d in caught.value.diagnostics)
    assert codes == ["R102", "R104"]
    assert caught.value.hint and "replicator validate" in caught.value.hint


def test_warnings_do_not_stop_loading(tmp_path: Path) -> None:
    text = MINIMAL.replace("{mysql: {}}", "{mysql: {password: hunter2}}")
    assert load_pipeline(write(tmp_path, text), environ={}).source.password == "hunter2"


def test_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        load_pipeline(tmp_path / "missing.yaml")
