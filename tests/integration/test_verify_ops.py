"""verify as a scheduled operation, on real MariaDB and DuckDB: a ``--where`` slice finds
only the differences inside it (by checksum and by fetching), ``--max-rows-per-second``
paces the source's queries (asserted on the pacer's decisions, with a clock of the test's
own), ``--metrics-file`` leaves gauges prometheus_client parses back, and ``--format json``
says what was checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import duckdb
import pytest
from prometheus_client.parser import text_string_to_metric_families

from replicator.errors import UsageError
from replicator.verify import verify_pipeline
from replicator.verify.pace import Pacer
from tests.integration.verify_support import (
    load,
    open_target,
    recreate_database,
    replicate_by_snapshot,
)

pytestmark = [pytest.mark.mysql]

ITEMS, PEOPLE = 20_000, 2_000


@pytest.fixture(scope="module")
def warehouse(mariadb, tmp_path_factory):
    """``items`` (compared by checksum) and ``people`` (a masked column: by fetching),
    replicated once; each test starts from a copy of the replicated DuckDB file."""
    tmp = tmp_path_factory.mktemp("verify_ops")
    database = f"verify_ops_{os.getpid()}"
    with mariadb.root_connection() as root, root.cursor() as cursor:
        recreate_database(cursor, database)  # in use: MariaDB's seq_1_to_N engine needs one
        cursor.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, "
                       "amount DECIMAL(12,2), at DATETIME(6), ts TIMESTAMP(6) NULL, "
                       "note VARCHAR(40))")
        cursor.execute(f"CREATE TABLE `{database}`.people (id INT PRIMARY KEY, "
                       "name VARCHAR(40), email VARCHAR(80))")
        # at: one second per id from 2026-01-01 (id 14400 is 04:00:00).
        cursor.execute(f"INSERT INTO `{database}`.items SELECT seq, seq / 100, "
                       "TIMESTAMPADD(SECOND, seq, '2026-01-01'), "
                       "TIMESTAMPADD(SECOND, seq, '2026-01-01'), CONCAT('item ', seq) "
                       f"FROM seq_1_to_{ITEMS}")
        cursor.execute(f"INSERT INTO `{database}`.people SELECT seq, CONCAT('person ', seq), "
                       f"CONCAT('p', seq, '@example.com') FROM seq_1_to_{PEOPLE}")
        cursor.execute(f"ANALYZE TABLE `{database}`.items, `{database}`.people")
        cursor.fetchall()
    pristine = tmp / "pristine.duckdb"
    path = tmp / "ops.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: ops
        source:
          mysql:
            host: 127.0.0.1
            port: ${{MYSQL_PORT}}
            user: replicator
            password: ${{MYSQL_PASSWORD}}
        target:
          duckdb: {{path: {tmp / 'warehouse.duckdb'}}}
        engine:
          checkpoint: {tmp / 'checkpoint'}
        tables:
          - source: {database}.items
          - source: {database}.people
            columns:
              email: {{mask: sha256}}
        """))
    pipeline = load(path, mariadb)
    sink = open_target(pipeline)
    replicate_by_snapshot(pipeline, sink)
    sink.close()
    shutil.copy(tmp / "warehouse.duckdb", pristine)
    yield path, database, tmp
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")


def _tamper(tmp, *statements):
    """The replicated target, then these statements on it."""
    shutil.copy(tmp / "pristine.duckdb", tmp / "warehouse.duckdb")
    with duckdb.connect(str(tmp / "warehouse.duckdb")) as target:
        for statement in statements:
            target.execute(statement)


TAMPERING = (
    'UPDATE main."ITEMS" SET "NOTE" = \'tampered\' WHERE "ID" IN (10, 15000)',
    'DELETE FROM main."ITEMS" WHERE "ID" IN (20, 17000)',
    # An extra row inside the time slice, one outside it.
    'INSERT INTO main."ITEMS" ("ID", "AMOUNT", "AT", "NOTE") '
    "VALUES (30000, 1, TIMESTAMP '2026-01-01 06:00:00', 'ghost'), "
    "(30001, 1, TIMESTAMP '2025-06-01 00:00:00', 'ghost')",
    'UPDATE main."PEOPLE" SET "NAME" = \'tampered\' WHERE "ID" IN (50, 500)',
)


def _found(report, table):
    return sorted((d.kind, int(d.key["id"])) for d in report.table(table).differences)


@pytest.mark.parametrize("checksums", [True, False], ids=["checksum", "fetch"])
def test_a_slice_finds_only_the_differences_inside_it(warehouse, mariadb, checksums):
    path, database, tmp = warehouse
    _tamper(tmp, *TAMPERING)
    pipeline = load(path, mariadb)
    by_id = verify_pipeline(pipeline, tables=[f"{database}.items", f"{database}.people"],
                            where="id BETWEEN 1 AND 100", checksums=checksums)
    assert _found(by_id, "items") == [("different", 10), ("missing", 20)]
    assert _found(by_id, "people") == [("different", 50)]
    items = by_id.table("items")
    assert items.method == ("checksum" if checksums else "fetch")
    assert by_id.table("people").method == "fetch"  # the mask: fetched, sliced all the same
    assert items.source_rows == items.target_rows + 1 == 100
    assert items.slice.target_sql == '"ID" BETWEEN 1 AND 100'
    # A slice by time (a DATETIME, and a TIMESTAMP read in UTC on both sides).
    for where in ("at >= '2026-01-01 04:00:00'", "ts >= '2026-01-01 04:00:00' OR id = 30000"):
        by_time = verify_pipeline(pipeline, tables=[f"{database}.items"], where=where,
                                  checksums=checksums)
        assert _found(by_time, "items") == [("different", 15000), ("extra", 30000),
                                            ("missing", 17000)], where
        assert by_time.table("items").source_rows == ITEMS - 14400 + 1
    if checksums:  # agreeing ranges of the slice were never fetched
        assert items.fetched_rows < 100 * 2


def test_a_slice_the_target_cannot_select_alike_is_refused(warehouse, mariadb):
    path, database, _ = warehouse
    pipeline = load(path, mariadb)
    with pytest.raises(UsageError, match="collation"):
        verify_pipeline(pipeline, tables=[f"{database}.items"], where="note = 'item 5'")
    with pytest.raises(UsageError, match="masked"):
        verify_pipeline(pipeline, tables=[f"{database}.people"], where="email IS NULL")
    with pytest.raises(UsageError, match="--where needs --table"):
        verify_pipeline(pipeline, where="id < 5")


class FakeTime:
    """A clock that only a sleep moves: the pacer's decisions, free of the machine's speed."""

    def __init__(self):
        self.now = 0.0
        self.lock = threading.Lock()

    def clock(self):
        with self.lock:
            return self.now

    def sleep(self, seconds):
        with self.lock:
            self.now += seconds


@pytest.mark.parametrize(("table", "rate", "checksums"), [
    ("items", 4_000, True), ("people", 1_000, False)], ids=["checksum", "fetch"])
def test_max_rows_per_second_paces_the_source(warehouse, mariadb, table, rate, checksums):
    path, database, tmp = warehouse
    _tamper(tmp, *TAMPERING)
    fake = FakeTime()
    pacer = Pacer(rate, clock=fake.clock, sleep=fake.sleep)
    report = verify_pipeline(load(path, mariadb), tables=[f"{database}.{table}"],
                             pacer=pacer, checksums=checksums)
    compared = report.table(table)
    rows = ITEMS if table == "items" else PEOPLE
    # Pacing changes nothing of what is found.
    assert compared.source_rows == rows
    assert len(compared.differences) == {"items": 6, "people": 2}[table]
    decisions = pacer.decisions
    # Each source query started only once the rows before it fit the rate ...
    for decision in decisions:
        assert decision.charged <= rate * (decision.at + decision.slept) + 1e-6
    # ... and it waited for that: the time is what the rows charged before the last
    # query cost at the rate (the fake clock moves only by the pacer's sleeps).
    assert fake.now == pytest.approx(decisions[-1].charged / rate)
    assert decisions[-1].charged >= rows  # every source row was charged (once at least)
    # Every query covered about the pacer's share (a quarter second of its rows), not a
    # burst: the first checksum range is sized by InnoDB's estimate, the next ones by the
    # rows per key the last one found.
    assert len(pacer.charges) == len(decisions)
    assert max(pacer.charges) <= 2 * pacer.rows_per_query
    assert len(decisions) >= rows // pacer.rows_per_query
    if checksums:
        assert compared.method == "checksum" and compared.top_ranges >= rows // 1_000 - 1


def _cli(path, mariadb, *args, before=()):
    """``replicator [before] verify PATH args``."""
    return subprocess.run(
        [sys.executable, "-m", "replicator", *before, "verify", str(path), *args],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, **mariadb.environment(), "NO_COLOR": "1"})


def test_metrics_file_and_json_say_what_was_checked(warehouse, mariadb):
    path, database, tmp = warehouse
    _tamper(tmp, *TAMPERING)
    metrics = tmp / "metrics" / "verify.prom"
    before = time.time()
    done = _cli(path, mariadb, "--tables", f"{database}.items,{database}.people",
                "--format", "json", "--metrics-file", str(metrics),
                "--max-rows-per-second", "1000000")
    after = time.time()
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["checked"] == {"tables": [f"{database}.items", f"{database}.people"],
                               "where": None, "method": "auto",
                               "max_rows_per_second": 1_000_000.0}
    items, people = data["tables"]
    # The fields schedulers already read are all still there.
    assert {"source_table", "target_table", "equal", "source_rows", "target_rows",
            "segments", "differing_segments", "missing", "extra", "different", "duplicate",
            "differences", "rechecks", "lag", "seconds", "skipped", "method", "fallback",
            "checksum_queries", "fetched_rows"} <= set(items)
    assert (items["missing"], items["extra"], items["different"]) == (2, 2, 2)
    assert (items["method"], people["method"], items["slice"]) == ("checksum", "fetch", None)
    assert 0 < items["slowest_query_seconds"] < 1.0 and items["top_ranges"] >= 1
    # Plain progress off a terminal, on stderr: a line as each table starts and ends.
    assert f"{database}.items: comparing (about" in done.stderr
    assert f"{database}.people: 2,000 source rows compared" in done.stderr

    families = {f.name: f for f in text_string_to_metric_families(metrics.read_text())}
    differences = {(s.labels["table"], s.labels["kind"]): s.value
                   for s in families["replicator_verify_differences"].samples}
    assert differences == {
        (f"{database}.items", "missing"): 2, (f"{database}.items", "extra"): 2,
        (f"{database}.items", "different"): 2, (f"{database}.items", "duplicate"): 0,
        (f"{database}.people", "missing"): 0, (f"{database}.people", "extra"): 0,
        (f"{database}.people", "different"): 2, (f"{database}.people", "duplicate"): 0}
    assert {s.labels["pipeline"] for s in families["replicator_verify_differences"].samples
            } == {"ops"}
    (success,) = families["replicator_verify_last_success_timestamp_seconds"].samples
    assert before <= success.value <= after
    assert oct(metrics.stat().st_mode & 0o777) == oct(0o600)  # run's writer: its user only

    # A slice, quiet: equal (exit 0), the file rewritten, nothing on stderr.
    sliced = _cli(path, mariadb, "--table", f"{database}.items", "--where",
                  "id BETWEEN 100 AND 9000", "--format", "json", "--metrics-file",
                  str(metrics), before=["-q"])
    assert (sliced.returncode, sliced.stderr) == (0, ""), sliced.stderr
    data = json.loads(sliced.stdout)
    assert data["checked"]["where"] == "id BETWEEN 100 AND 9000"
    assert data["tables"][0]["slice"] == {"where": "id BETWEEN 100 AND 9000",
                                          "source": "id BETWEEN 100 AND 9000",
                                          "target": '"ID" BETWEEN 100 AND 9000'}
    families = {f.name: f for f in text_string_to_metric_families(metrics.read_text())}
    assert {s.labels["table"] for s in families["replicator_verify_differences"].samples
            } == {f"{database}.items"}
    assert all(s.value == 0 for s in families["replicator_verify_differences"].samples)

    # A slice the target cannot evaluate alike: exit 2, one error line, no file rewritten.
    written = metrics.stat().st_mtime_ns
    refused = _cli(path, mariadb, "--table", f"{database}.items", "--where", "note > 'a'",
                   "--metrics-file", str(metrics))
    assert refused.returncode == 2
    assert "collation" in refused.stderr and "Traceback" not in refused.stderr
    assert metrics.stat().st_mtime_ns == written


def test_progress_on_a_terminal_is_a_bar_per_table(warehouse, mariadb):
    """stderr a terminal (a pseudo-terminal here): rich's bar per table, ending full, and
    not the plain lines; stdout (the result) stays plain."""
    import pty

    path, database, tmp = warehouse
    _tamper(tmp)
    controller, terminal = pty.openpty()
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(controller, 65536)
            except OSError:  # the terminal side closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "replicator", "verify", str(path), "--table",
             f"{database}.items"], stdout=subprocess.PIPE, stderr=terminal, timeout=300,
            env={**os.environ, **mariadb.environment(), "NO_COLOR": "1", "TERM": "xterm",
                 "COLUMNS": "120"})
    finally:
        os.close(terminal)
        reader.join(timeout=10)
        os.close(controller)
    shown = b"".join(chunks).decode(errors="replace")
    assert done.returncode == 0, shown
    assert f"verify {database}.items" in shown
    assert f"{ITEMS}/{ITEMS} rows" in shown  # the bar ends full: every source row counted
    assert "comparing (about" not in shown  # the plain lines are for logs, not terminals
    assert b"equal" in done.stdout
