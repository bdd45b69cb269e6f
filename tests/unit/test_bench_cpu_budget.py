"""bench/cpu_budget.py: one e2e run's CPU split into parts that add up to the tree's."""

from __future__ import annotations

import pytest

from bench.cpu_budget import budget_of, markdown


def _e2e(**more):
    return {
        "target": "duckdb", "changes": 100_000, "server_cpu_seconds": 0.3,
        "apply_cpu_seconds": 0.9, "driver_cpu_share_streaming": 0.2,
        "usage": {"cpu_seconds": 6.0, "cpu_seconds_by_role": {
            "driver": 1.5, "jvm": 2.0, "other": 0.1, "python_workers": 2.4}},
        **more,
    }


DECODE = {"columnar": {"rows": 100_000, "cpu_seconds": 1.6},
          "landed": {"rows": 100_000, "cpu_seconds": 1.6},
          "parquet": {"rows": 100_000, "cpu_seconds": 0.1}}


def test_the_parts_add_up_to_the_tree():
    budget = budget_of(_e2e(), DECODE)
    parts = budget["us_per_change"]
    assert parts == {"mariadb": 3.0, "decode": 15.0, "parquet": 1.0, "spark_python": 8.0,
                     "jvm": 21.0, "apply": 9.0, "warehouse": 0.0, "driver_rest": 6.0,
                     "tree": 60.0, "all": 63.0}
    inside = ("decode", "parquet", "spark_python", "jvm", "apply", "driver_rest")
    assert sum(parts[p] for p in inside) == pytest.approx(parts["tree"])
    assert budget["driver_share_of_tree"] == 0.25


def test_decode_is_the_executors_land_range_less_its_parquet_write():
    assert budget_of(_e2e(), DECODE)["us_per_change"]["decode"] == pytest.approx(15.0)
    # Older results have no parquet run: the decode alone, and the difference for Parquet.
    decode = {k: v for k, v in DECODE.items() if k != "parquet"}
    parts = budget_of(_e2e(), decode)["us_per_change"]
    assert parts["decode"] == pytest.approx(16.0) and parts["parquet"] == pytest.approx(0.0)


def test_without_decode_figures_the_workers_are_one_part():
    parts = budget_of(_e2e(), {})["us_per_change"]
    assert parts["decode"] is None and parts["spark_python"] == 24.0


def test_a_failed_run_has_no_budget_and_the_table_names_every_part():
    assert "error" in budget_of({"error": "boom"}, DECODE)
    table = markdown({"duckdb": budget_of(_e2e(), DECODE),
                      "fakesnow": budget_of(_e2e(target="snowflake", warehouse_cpu_seconds=2.0),
                                            DECODE)})
    assert "| warehouse process | 0.0 | 20.0 |" in table
    assert "| whole tree (replicator run) | 60.0 | 60.0 |" in table
