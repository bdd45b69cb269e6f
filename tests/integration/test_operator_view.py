"""What an operator sees of a real ``replicator run`` (its own process and JVM) and of
``replicator status``.

- On a terminal (a pseudo-terminal) the run shows a snapshot progress bar
  per table with rows copied of the estimate, and none of Spark's start-up lines: those are
  in ``<checkpoint>/spark.log``.
- Off a terminal, every stderr line is one of replicator's own line forms; with
  ``--log-format json`` every line is a JSON object, the final error included (code,
  message, hint).
- ``status`` exits 0 while a forever run streams, 2 once it is stopped (0 with
  ``--stopped-ok``), 2 after a failed run, and names the failure.
- Every panel query of docs/grafana-dashboard.json names a metric that the running pipeline's
  ``/metrics`` endpoint serves, scraped over HTTP.

The target is compared with the source row by row (the demo schema's awkward values).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.demo import workload
from tests.integration.e2e_support import assert_target_equals_source

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
SPARK_CHATTER = ("Using incubator modules", "Setting default log level", "sc.setLogLevel",
                 "WARN NativeCodeLoader", "log4j")
# The line forms `replicator run` writes on stderr in text mode (engine/apply/metrics.format_text,
# the runner's notices, the final summary).
OWN_LINE = re.compile(
    r"^(?:(?:stream|snapshot) pipeline=\S+ batch=-?\d+ position=\S+ changes=\d+ rows=\d+ "
    r"seconds=[\d.]+"
    r"|  table=\S+ changes=\d+ rows=\d+ skipped=(?:true|false) decode_s=[\d.]+ "
    r"transform_s=[\d.]+ stage_s=[\d.]+ merge_s=[\d.]+(?: unrouted=\d+)?"
    r"|starting pipeline \S+ .*|resuming pipeline \S+ .*|snapshot of \d+ table\(s\) at \S+"
    r"|streaming from \S+"
    r"|metrics on http://127\.0\.0\.1:\d+/metrics"
    r"|received SIG\w+: stopping after the current batch \(again to stop now\)"
    r"|\S+: \d+ batch\(es\), \d+ change\(s\), \d+ row\(s\) applied, \d+ snapshot row\(s\); "
    r"at \S+(?: \(stopped\))?)$"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _pipeline_file(tmp_path: Path, database: str, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: {name}
        source:
          mysql:
            host: 127.0.0.1
            port: ${{MYSQL_PORT}}
            user: replicator
            password: ${{MYSQL_PASSWORD}}
        target:
          duckdb: {{path: "{tmp_path / (name + '.duckdb')}"}}
        batching: {{max_rows: 5000, max_delay: 500ms}}
        engine:
          checkpoint: "{tmp_path / (name + '-checkpoint')}"
          conf: {{spark.sql.shuffle.partitions: "2"}}
        tables:
          - source: {database}.customers
          - source: {database}.orders
          - source: {database}.awkward
        """))
    return path


@pytest.fixture
def demo(mariadb, fresh_database, tmp_path, monkeypatch, request):
    """The demo schema (a few thousand rows, or ``rows`` of the test's ``demo_rows`` marker
    per table), the pipeline file, and the environment."""
    marker = request.node.get_closest_marker("demo_rows")
    customers, orders, awkward = marker.args if marker else (3000, 6000, 300)
    env = {**os.environ, **mariadb.environment(), "PYTHONPATH": str(ROOT)}
    env.pop("NO_COLOR", None)
    for key, value in mariadb.environment().items():
        monkeypatch.setenv(key, value)  # load_pipeline in this process reads the same file
    with mariadb.root_connection() as root:
        workload.create_schema(root, fresh_database)
        workload.seed(root, fresh_database, customers=customers, orders=orders,
                      awkward=awkward)
        with root.cursor() as cursor:
            # InnoDB's row estimate (information_schema.TABLES) is refreshed by ANALYZE.
            cursor.execute(f"ANALYZE TABLE `{fresh_database}`.customers, "
                           f"`{fresh_database}`.orders, `{fresh_database}`.awkward")
            cursor.fetchall()
    return {"env": env, "database": fresh_database,
            "path": _pipeline_file(tmp_path, fresh_database, "opview"),
            "warehouse": tmp_path / "opview.duckdb"}


def _replicator(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicator", *map(str, args)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _status(env, path, *options) -> tuple[int, dict]:
    done = _replicator(env, "status", path, "--format", "json", *options, timeout=120)
    return done.returncode, json.loads(done.stdout)


def _assert_target_equals_source(mariadb, demo) -> None:
    import duckdb

    pipeline = load_pipeline(demo["path"])
    with mariadb.root_connection() as root, contextlib.closing(
            duckdb.connect(str(demo["warehouse"]), read_only=True)) as target:
        assert_target_equals_source(pipeline, root, target)


def _run_on_a_terminal(argv: list[str], env: dict[str, str], *, rows: int = 50,
                       columns: int = 200, timeout: float = 300) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as stdin/stdout/stderr; its exit code and output.

    subprocess forks in C and runs no Python in the child. pexpect forks with ``pty.fork``,
    whose child runs Python code of a multi-threaded pytest process (Spark's py4j threads):
    under CI that child died of a segmentation fault before it could exec."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                               cwd=ROOT, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1.0)[0]:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every process holding the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
        else:
            process.kill()
    finally:
        os.close(master)
    return process.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_run_on_a_terminal_and_off_it_shows_only_replicators_lines(mariadb, demo):
    env, path = demo["env"], demo["path"]
    code, output = _run_on_a_terminal(
        [sys.executable, "-m", "replicator", "run", str(path), "--until-caught-up"],
        {**env, "TERM": "xterm-256color"})
    screen = ANSI.sub("", output)
    assert code == 0, repr(screen[-3000:])
    database = demo["database"]
    # One bar per table, ending at its real row count (rows/s and ETA columns beside it).
    for table, rows in (("customers", 3000), ("orders", 6000), ("awkward", 300)):
        assert re.search(rf"snapshot {database}\.{table} .*{rows}/{rows}\s+rows\s+[\d,]+ rows/s", screen), screen
    assert "rows/s" in screen and "ETA" in screen
    for chatter in SPARK_CHATTER:
        assert chatter not in screen, (chatter, screen[-3000:])
    spark_log = Path(load_pipeline(path).checkpoint_dir) / "spark.log"
    assert "Using incubator modules" in spark_log.read_text()  # routed, not lost

    with mariadb.root_connection() as root:
        workload.apply_changes(root, database, rounds=30)
    done = _replicator(env, "run", path, "--until-caught-up")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert any(line.startswith("stream pipeline=opview ") for line in lines), done.stderr
    strangers = [line for line in lines if not OWN_LINE.match(line)]
    assert strangers == [], strangers
    _assert_target_equals_source(mariadb, demo)

    code, status = _status(env, path)
    assert (code, status["health"], status["state"]) == (2, "down", "caught_up"), status
    assert status["lag_bytes"] == 0 and status["last_batch"]["kind"] == "stream"
    code, status = _status(env, path, "--stopped-ok")
    assert (code, status["health"]) == (0, "healthy"), status
    # From the checkpoint's chunk plans: the copy is done (this last run copied nothing).
    assert {t["table"]: t["done"] for t in status["snapshot_tables"]} == {
        f"{database}.{t}": True for t in ("customers", "orders", "awkward")}


def _wait_for(predicate, what: str, timeout: float = 600, process=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the run ended (exit {process.returncode}) before {what}")
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def _dashboard_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"]
               for target in panel.get("targets", [])]
    assert len(queries) >= 8
    names = set()
    for query in queries:
        found = set(re.findall(r"\b((?:replicator|process)_[a-z_]+)\b", query))
        assert found, query
        names |= found
    return names


@pytest.mark.demo_rows(50, 200, 60)
def test_status_of_a_running_a_stopped_and_a_failed_pipeline_and_the_dashboard(mariadb, demo):
    env, path = demo["env"], demo["path"]
    code, status = _status(env, path)
    assert (code, status["state"]) == (2, "never started"), status
    run = subprocess.Popen(
        [sys.executable, "-m", "replicator", "run", str(path), "--metrics-port", "0"],
        env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    # Drained on a thread: a full pipe would block the run.
    threading.Thread(target=lambda: stderr.extend(run.stderr), daemon=True).start()
    try:
        def metrics_port():
            for line in list(stderr):
                match = re.search(r"metrics on http://127\.0\.0\.1:(\d+)/metrics", line)
                if match:
                    return int(match.group(1))
            return None

        port = _wait_for(metrics_port, "the metrics endpoint", process=run)
        checkpoint = Path(load_pipeline(path).checkpoint_dir)

        def phase(*wanted):
            with contextlib.suppress(FileNotFoundError, ValueError):
                return json.loads((checkpoint / "run.json").read_text())["phase"] in wanted
            return False

        # Changes made once the copy is under way come after the start position: streamed.
        _wait_for(lambda: phase("snapshot", "streaming"), "the snapshot", process=run)
        with mariadb.root_connection() as root:
            workload.apply_changes(root, demo["database"], rounds=10)
        _wait_for(lambda: phase("streaming"), "the first stream batch", process=run)
        code, status = _status(env, path)
        assert (code, status["health"]) == (0, "healthy"), status
        assert status["running"] and status["pid"] == run.pid
        assert status["state"] == "running (streaming)" and status["heartbeat_age_s"] < 30
        assert status["last_batch"]["kind"] == "stream"

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as page:
            scraped = page.read().decode()
        served = set(re.findall(r"^([a-z_]+?)(?:\{| )", scraped, re.M))
        missing = _dashboard_metrics() - served
        assert not missing, (missing, scraped)
        assert re.search(r'^replicator_rows_applied_total\{[^}]*table="[^"]+orders"[^}]*\} '
                         r"[1-9]", scraped, re.M), scraped
    finally:
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=120)
        except subprocess.TimeoutExpired:
            run.kill()
            raise
    assert run.returncode == 130, "".join(stderr)[-3000:]
    strangers = [line for line in "".join(stderr).splitlines() if not OWN_LINE.match(line)]
    assert strangers == [], strangers
    code, status = _status(env, path)
    assert (code, status["health"], status["state"]) == (2, "down", "stopped"), status
    assert not status["running"] and status["last_error"] is None

    # A failed run: a table the pipeline names was dropped while no run followed it; the
    # start-up reads that DDL and `drop_table: stop` (the default) stops there. With
    # --log-format json every stderr line is JSON, the last one the error with its code,
    # message and hint.
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"DROP TABLE `{demo['database']}`.awkward")
    done = _replicator(env, "run", path, "--until-caught-up", "--log-format", "json")
    assert done.returncode == 1, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    error = lines[-1]["error"]
    assert error["code"] == "EngineError" and "awkward" in error["message"] and error["hint"]
    assert "DROP TABLE" in error["message"], error
    code, status = _status(env, path)
    assert (code, status["health"], status["state"]) == (2, "down", "failed"), status
    assert status["last_error"]["code"] == "EngineError"
    assert "awkward" in status["last_error"]["message"]
    code, _ = _status(env, path, "--stopped-ok")
    assert code == 2  # a failed run is down, cron or not
