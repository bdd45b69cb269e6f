"""bench/run end to end with tiny sizes: every section runs through the same code path as the
full benchmark and its result JSON is complete and consistent. No timing thresholds: speed is
measured by bench/run, never by tests (issue 8)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.mysql, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[2]
# Every section but `partitions` (the e2e DuckDB run again with one YAML setting changed).
SECTIONS = "decode,profile,e2e,cpu,latency,snapshot,bigtxn,startup"
# The big transaction in merge and scd2 (the mode staged by key); changelog only in bench runs.
TINY = ["--only", SECTIONS, "--changes", "600", "--latency-rate", "100", "--latency-seconds", "3",
        "--snapshot-rows", "3000", "--bigtxn-modes", "merge,scd2"]


@pytest.fixture(scope="module")
def bench_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "result.json"
    env = {**os.environ, "PYTHON": sys.executable}
    completed = subprocess.run(
        [str(REPO / "bench" / "run"), "--quick", *TINY, "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert out.exists(), completed.stderr[-3000:]
    return completed, json.loads(out.read_text())


def test_every_section_ran_without_error(bench_result):
    completed, result = bench_result
    assert result["failed"] == [], completed.stderr[-3000:]
    assert completed.returncode == 0
    assert result["sections"] == SECTIONS.split(",")
    assert "section" in completed.stdout and "results:" in completed.stdout
    env = result["environment"]
    assert env["cores"] >= 1 and len(env["load_average_start"]) == 3
    assert len(env["git_commit"]) == 40 and env["packages"]["mysql-replication"]


def test_decoders_read_exactly_the_workload(bench_result):
    _, result = bench_result
    workload = result["workload"]
    assert 0 < workload["changes"] <= workload["statements"] == 600
    assert sum(workload["ops"].values()) == workload["changes"]
    decode = result["decode"]
    assert decode["library"]["rows"] == workload["changes"]
    assert decode["read_changes"]["rows"] == workload["changes"]
    assert decode["read_changes"]["values"] == decode["library"]["values"] > workload["changes"]
    if "read_changes_library" in decode:  # read_changes offers both paths (fast=...)
        assert decode["read_changes_library"]["rows"] == workload["changes"]
    assert decode["library"]["rows_per_s"] > 0 and decode["library"]["cpu_seconds"] > 0
    fast = decode["fast"]
    if "skipped" not in fast:
        assert fast["rows"] == workload["changes"]
        assert decode["fast_identical_to_read_changes"] == {
            "changes_compared": workload["changes"], "identical": True}


def test_profile_follows_every_change_through_each_stage(bench_result):
    _, result = bench_result
    profile = result["profile"]
    changes = result["workload"]["changes"]
    assert {stage["rows"] for stage in profile["stages"].values()} == {changes}
    assert len(profile["added_us_per_row"]) == len(profile["stages"]) == 4
    assert profile["executor_side_top_functions_by_tottime"]


@pytest.mark.parametrize("target", ["duckdb", "fakesnow"])
def test_end_to_end_applies_every_change(bench_result, target):
    _, result = bench_result
    entry = result["e2e"][target]
    assert entry["returncode"] == 0
    assert entry["changes"] == entry["expected_changes"] == result["workload"]["changes"]
    assert 0 < entry["rows"] <= entry["changes"] and entry["batches"] >= 1
    assert entry["changes_per_s"] > 0 and entry["ratio_to_library_decode"] > 0
    phases = entry["phases_seconds"]
    assert set(phases) >= {"startup", "spark_read", "decode", "transform", "stage", "merge"}
    assert all(value >= 0 for value in phases.values())
    assert sum(phases.values()) <= entry["wall_seconds"] * 1.05
    usage = entry["usage"]
    assert usage["peak_rss_mib"] > usage["peak_rss_mib_by_role"]["driver"] > 0
    assert "jvm" in usage["peak_rss_mib_by_role"] and usage["cpu_seconds"] > 0
    assert entry["cpu_s_per_1k_changes"] > 0
    if target == "duckdb":
        assert entry["target_matches_source"] is True
        assert entry["target_rows"] == entry["source_rows"]


@pytest.mark.parametrize("target", ["duckdb", "fakesnow"])
def test_the_cpu_budget_splits_the_whole_tree(bench_result, target):
    _, result = bench_result
    budget = result["cpu_budget"][target]
    parts = budget["us_per_change"]
    assert parts["tree"] > 0 and parts["jvm"] > 0 and parts["apply"] > 0 and parts["decode"] > 0
    assert parts["mariadb"] > 0 and parts["parquet"] > 0
    assert (parts["warehouse"] > 0) == (target == "fakesnow")  # DuckDB runs in the driver
    inside = ("decode", "parquet", "spark_python", "jvm", "apply", "driver_rest")
    assert sum(parts[p] for p in inside) == pytest.approx(parts["tree"], abs=1.0)
    assert 0 < budget["driver_share_of_tree"] < 1


def test_latency_matches_every_transaction(bench_result):
    _, result = bench_result
    latency = result["latency"]
    assert latency["transactions"] > 0 and latency["unmatched_transactions"] == 0
    assert latency["changes"] > 0 and latency["batches"] >= 1
    assert 0 < latency["min_s"] <= latency["p50_s"] <= latency["p95_s"] <= latency["p99_s"]
    assert latency["p99_s"] <= latency["max_s"]


def test_snapshot_and_big_transaction(bench_result):
    _, result = bench_result
    snapshot = result["snapshot"]
    assert snapshot["snapshot_rows"] == snapshot["rows"] == 3000
    assert snapshot["target_matches_source"] is True and snapshot["rows_per_s"] > 0
    big = result["big_transaction"]
    assert big["changes"] == big["rows"] == 3000
    assert big["batches"] == 1  # a batch never splits a transaction
    assert big["peak_rss_gib"] > 0
    scd2 = result["big_transaction_modes"]["scd2"]
    assert scd2["mode"] == "scd2" and scd2["target_matches_source"] is True
    assert set(result["big_transaction_modes"]) == {"scd2"}


def test_startup_commands_succeed(bench_result):
    _, result = bench_result
    startup = result["startup"]
    for command in ("validate", "plan_offline", "python_baseline"):
        assert startup[command]["returncodes"] == [0]
        assert 0 < startup[command]["min_s"] <= startup[command]["median_s"]


def test_charts_are_drawn_beside_the_result(bench_result):
    completed, result = bench_result
    charts = [Path(line.split(": ", 1)[1]) for line in completed.stdout.splitlines()
              if line.startswith("chart: ")]
    assert sorted(chart.name.rsplit("-", 1)[1] for chart in charts) == [
        "latency.png", "memory.png", "throughput.png"], completed.stdout[-2000:]
    for chart in charts:
        header = chart.read_bytes()[:24]
        assert header[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
        assert width >= 600 and height >= 300, (chart, width, height)
    # What the charts draw is in the result: every latency sample, the memory timeline.
    latency = result["latency"]
    assert len(latency["latencies_s"]) == latency["transactions"] - latency["unmatched_transactions"]
    timeline = result["big_transaction"]["usage"]["rss_timeline"]
    assert len(timeline["t_s"]) >= 2 and timeline["mib"]["driver"]


def test_the_workload_is_deterministic_per_seed():
    from bench.workload import Generator

    def statements(seed):
        generator = Generator("bench", seed)
        return [s.sql for batch in generator.transactions(2_000, repr, (5, 50)) for s in batch]

    first = statements(7)
    assert first == statements(7)
    assert first != statements(8)
    assert len(first) == 2_000
    kinds = [sql.split(" ", 1)[0] for sql in first]
    assert {"INSERT", "UPDATE", "DELETE"} == set(kinds)
    assert kinds.count("INSERT") > kinds.count("UPDATE") > kinds.count("DELETE")
