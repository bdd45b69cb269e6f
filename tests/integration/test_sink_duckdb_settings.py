"""`target.duckdb.settings`: DuckDB configuration options the embedded target opens with,
read from the YAML; a setting DuckDB refuses is our error with a hint, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.errors import ConfigError, SinkError
from replicator.plan import build_plan, offline_catalog
from replicator.sink import open_sink

PIPELINE = """\
version: 1
name: settings
source:
  mysql: {{host: 127.0.0.1, user: r}}
target:
  duckdb:
    path: {path}
    settings: {settings}
tables:
  - source: shop.orders
    key: [id]
    columns: {{id: {{source_type: bigint}}}}
"""


def _pipeline(tmp_path: Path, settings: str):
    path = tmp_path / "settings.yaml"
    path.write_text(PIPELINE.format(path=tmp_path / "w.duckdb", settings=settings))
    return load_pipeline(path, environ={})


def test_the_connection_opens_with_the_settings(tmp_path):
    pipeline = _pipeline(tmp_path, "{memory_limit: 100MB, threads: 1, "
                                   "preserve_insertion_order: false}")
    assert pipeline.target.warehouse.settings == (
        ("memory_limit", "100MB"), ("preserve_insertion_order", False), ("threads", 1))
    sink = open_sink(pipeline, build_plan(pipeline, offline_catalog(pipeline)))
    try:
        cursor = sink.connection.cursor()
        cursor.execute("SELECT current_setting('memory_limit'), current_setting('threads'), "
                       "current_setting('preserve_insertion_order')")
        limit, threads, order = cursor.fetchone()
        assert limit.endswith("MiB") and float(limit.split()[0]) < 100  # 100MB = 95.3 MiB
        assert (threads, order) == (1, False)
    finally:
        sink.close()


@pytest.mark.parametrize(("settings", "named"), [
    ("{no_such_setting: 1}", "no_such_setting"),
    ("{memory_limit: lots}", "lots"),
])
def test_a_refused_setting_is_our_error_with_a_hint(tmp_path, settings, named):
    pipeline = _pipeline(tmp_path, settings)
    with pytest.raises(SinkError) as refused:
        open_sink(pipeline, build_plan(pipeline, offline_catalog(pipeline)))
    assert named in refused.value.message
    assert "target.duckdb.settings" in refused.value.hint


@pytest.mark.parametrize("settings", ["{memory_limit: [1GB]}", "{Memory-Limit: 1GB}", "[1GB]"])
def test_validate_refuses_settings_that_are_not_name_value_pairs(tmp_path, settings):
    with pytest.raises(ConfigError) as refused:
        _pipeline(tmp_path, settings)
    assert "settings" in str(refused.value)


def test_without_a_memory_limit_the_target_gets_its_size_plus_the_apply_memory(tmp_path):
    """Default `memory_limit`: the file's size when the run opens it + APPLY_MEMORY_BYTES (a
    1M-row transaction's apply stays under issue 30's 1.5 GiB bound); a memory_limit of the
    user's is left as it is, in any case of its name."""
    import duckdb

    from replicator.sink.duckdb import APPLY_MEMORY_BYTES, CHECKPOINT_THRESHOLD, default_settings

    pipeline = _pipeline(tmp_path, "{threads: 1}")
    sink = open_sink(pipeline, build_plan(pipeline, offline_catalog(pipeline)))
    try:
        cursor = sink.connection.cursor()
        cursor.execute("SELECT current_setting('memory_limit')")
        limit = cursor.fetchone()[0]
    finally:
        sink.close()
    assert limit.endswith("MiB") and round(float(limit.split()[0]) * 2**20 / 1e6) == 384

    path = tmp_path / "big.duckdb"
    with duckdb.connect(str(path)) as filled:
        filled.execute("CREATE TABLE t AS SELECT range AS id, md5(range::VARCHAR) AS pad "
                       "FROM range(100000)")
    size = path.stat().st_size
    assert size > 1_000_000
    assert default_settings(str(path), {}) == {
        "memory_limit": f"{-(-(size + APPLY_MEMORY_BYTES) // 1_000_000)}MB",
        "checkpoint_threshold": CHECKPOINT_THRESHOLD}
    assert default_settings(str(path), {"Memory_Limit": "1GB"}) == {
        "checkpoint_threshold": CHECKPOINT_THRESHOLD}
    assert default_settings(":memory:", {}) == {}


def test_without_a_checkpoint_threshold_the_target_checkpoints_at_256mb(tmp_path):
    """Default `checkpoint_threshold`: 256MB, not DuckDB's 16 MiB (a checkpoint rewrites the
    row groups the MERGEs touched; docs/decisions/duckdb-apply-last-change.md); the user's,
    under either of DuckDB's names, is left as it is."""
    from replicator.sink.duckdb import CHECKPOINT_THRESHOLD, default_settings

    pipeline = _pipeline(tmp_path, "{threads: 1}")
    sink = open_sink(pipeline, build_plan(pipeline, offline_catalog(pipeline)))
    try:
        threshold = sink.connection.execute(
            "SELECT current_setting('checkpoint_threshold')").fetchone()[0]
    finally:
        sink.close()
    assert CHECKPOINT_THRESHOLD == "256MB" and threshold == "244.1 MiB"  # DuckDB prints MiB
    path = str(tmp_path / "w.duckdb")
    for name in ("checkpoint_threshold", "WAL_AutoCheckpoint"):
        assert "checkpoint_threshold" not in default_settings(path, {name: "1GB"})


def test_a_second_sink_on_a_grown_file_in_the_same_process_opens(tmp_path):
    """DuckDB shares one instance per file in a process and refuses a second connection with
    another configuration: the default memory_limit is the one the file was first opened with
    (CI failed a lease test where a second sink opened the file after the first had grown it)."""
    pipeline = _pipeline(tmp_path, "{threads: 1}")
    plan = build_plan(pipeline, offline_catalog(pipeline))
    first = open_sink(pipeline, plan)
    try:
        first.connection.execute("CREATE TABLE pad AS SELECT range AS id, md5(range::VARCHAR) "
                                 "AS pad FROM range(200000)")
        first.connection.execute("CHECKPOINT")
        assert (tmp_path / "w.duckdb").stat().st_size > 2_000_000  # past the MB the limit rounds to
        second = open_sink(pipeline, plan)
        try:
            assert second.connection.execute("SELECT count(*) FROM pad").fetchone() == (200000,)
        finally:
            second.close()
    finally:
        first.close()
