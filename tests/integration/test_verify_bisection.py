"""verify's bisection on a 1M-row table of the bench's ``orders`` shape (BIGINT UNSIGNED
key, ENUM, DECIMAL, NULLs, utf8mb4 text with a quote and an emoji, DATETIME(6), TIMESTAMP;
filled inside MariaDB from ``seq_1_to_1000000`` and inside DuckDB from ``range()`` with the
same formulas, ~5 s, not through the pipeline): one changed row (a text, or a DATETIME(6)
by a microsecond) is named exactly by fetching a few hundred rows (< 10,000, < 1%),
agreeing ranges cost one checksum each and are never fetched; the CLI's JSON says how each
table was checked, and ``--repair --dry-run`` what it would copy.

Wall time of this module (2 cores): 25 s at load 6-7; 15 s at load 0.2 before the
microsecond case was added (~3 s more)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from bench.context import BenchContext, Sizes
from bench.snapshot import DATABASE, fill_table
from bench.verify import prepare_target, tamper, untamper
from replicator.config import load_pipeline
from replicator.verify import verify_pipeline
from replicator.verify.ranges import QUERY_ROWS

pytestmark = [pytest.mark.mysql, pytest.mark.slow]  # ~25 s (CI runs slow tests too)

ROWS = 1_000_000


@pytest.fixture(scope="module")
def big(mariadb, tmp_path_factory):
    ctx = BenchContext(mariadb, tmp_path_factory.mktemp("bisection"), Sizes())
    fill_table(ctx, ROWS)
    path, warehouse, relation = prepare_target(ctx, "bisection", ROWS)
    yield ctx, path, warehouse, relation
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{DATABASE}`")


def _verify(ctx, path, **options):
    return verify_pipeline(load_pipeline(path, environ=ctx.environment()), **options).tables[0]


def test_equal_costs_one_pass_of_checksums_and_no_row(big):
    ctx, path, _, _ = big
    table = _verify(ctx, path, walk={"query_seconds": None})  # fixed ranges: countable
    assert table.equal and table.method == "checksum"
    assert table.source_rows == table.target_rows == ROWS
    assert table.fetched_rows == 0
    # Top ranges of ~100k rows (the source's estimate), 32 buckets each: one query per
    # side and top range, and every bucket agreed.
    assert ROWS // QUERY_ROWS <= table.checksum_queries <= ROWS // QUERY_ROWS + 2
    assert table.segments == table.checksum_queries * 32


# One target row changed: a text value, or a DATETIME(6) by its smallest step (a microsecond).
CHANGES = {
    "NOTE": ("\"NOTE\" = 'tampered'", "\"NOTE\" = 'order ' || \"ID\" || ' for O''Brien 🚀'"),
    "CREATED_AT": ("\"CREATED_AT\" = \"CREATED_AT\" + INTERVAL 1 MICROSECOND",
                   "\"CREATED_AT\" = \"CREATED_AT\" - INTERVAL 1 MICROSECOND"),
}


@pytest.mark.parametrize("column", CHANGES)
def test_one_changed_row_fetches_under_one_percent(big, column):
    ctx, path, warehouse, relation = big
    key = 123_457  # its NOTE is not NULL (id % 5 != 0)
    change, back = CHANGES[column]
    with duckdb.connect(str(warehouse)) as connection:
        connection.execute(f'UPDATE {relation} SET {change} WHERE "ID" = ?', [key])
    try:
        table = _verify(ctx, path, walk={"parallel": 1, "query_seconds": None})
    finally:
        with duckdb.connect(str(warehouse)) as connection:
            connection.execute(f'UPDATE {relation} SET {back} WHERE "ID" = ?', [key])
    (difference,) = table.differences
    assert (difference.kind, int(difference.key["id"])) == ("different", key)
    assert [c.target_column for c in difference.columns] == [column]
    # Issue 31's acceptance: fewer than 1% of the table's rows fetched (both sides counted).
    assert 0 < table.fetched_rows < 10_000 == ROWS // 100
    # Each agreeing bucket cost its one checksum: the top ranges' buckets, then one level
    # down inside the one differing bucket; nothing else was queried.
    tops = table.checksum_queries - 1
    assert table.segments == (tops * 32 - 1) + (32 - 1) + 1  # agreed + the fetched leaf


def test_cli_json_and_repair_dry_run(big):
    ctx, path, warehouse, relation = big
    tamper(warehouse, relation, [5, 150_001])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "replicator", "verify", str(path), "--format", "json",
             "--repair", "--dry-run", "--table", f"{DATABASE}.orders", "--where",
             "id < 200000"], capture_output=True, text=True,
            env={**os.environ, **ctx.environment()}, timeout=300)
        # Fetching all 1M rows takes ~45 s: the fetch path is shown on a slice.
        fetched = subprocess.run(
            [sys.executable, "-m", "replicator", "verify", str(path), "--method", "fetch",
             "--table", f"{DATABASE}.orders", "--where", "id < 20000"],
            capture_output=True, text=True, env={**os.environ, **ctx.environment(),
                                                 "NO_COLOR": "1"}, timeout=300)
    finally:
        untamper(warehouse, relation, [5, 150_001])
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    (table,) = data["tables"]
    assert (table["method"], table["fallback"]) == ("checksum", [])
    assert [(d["kind"], d["key"]) for d in table["differences"]] == [
        ("different", {"id": "5"}), ("different", {"id": "150001"})]
    assert table["fetched_rows"] < 2 * ROWS // 100
    assert data["repair"] == {"dry_run": True, "requests": [
        {"table": f"{DATABASE}.orders", "where": "`id` IN (5, 150001)", "keys": 2,
         "why": "2 missing or different key(s)"}]}
    assert not (ctx.workdir / "bisection.checkpoint" / "recopy-requests").exists()
    assert fetched.returncode == 1, fetched.stderr
    assert "by fetching every row" in fetched.stdout
    assert "[id='5'] differs: NOTE" in fetched.stdout
