"""Faults on the MySQL side, each on a server of its own (restarts and purges must not disturb
the session's shared server): a restart mid-run, a purged binlog at restart, two readers with
one server_id. Each ends with `verify` equal, or with the clear error the user must see."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.errors import BinlogGoneError, SourceError
from replicator.model.pipeline import DuckDBTarget
from replicator.source.throwaway import ThrowawayMariaDB
from replicator.verify import verify_pipeline
from tests.integration.e2e_support import demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


class SetupError(RuntimeError):
    """The scenario could not be staged (not the behaviour under test)."""



@pytest.fixture(scope="module")
def server() -> Iterator[ThrowawayMariaDB]:
    with ThrowawayMariaDB(server_id=1) as own:
        yield own


def _database(server: ThrowawayMariaDB, name: str, *, backlog_rounds: int = 0) -> None:
    with server.root_connection() as root:
        with root.cursor() as cursor:
            cursor.execute(f"CREATE DATABASE `{name}`")
        create_schema(root, name)
        seed(root, name, customers=30, orders=200, awkward=40)
        if backlog_rounds:
            apply_changes(root, name, rounds=backlog_rounds, first_new_id=500_000)


def _pipeline(server: ThrowawayMariaDB, database: str, workdir: Path, name: str, **kw: Any):
    return demo_pipeline(server.source(), database, workdir,
                         DuckDBTarget(str(workdir / "warehouse.duckdb")), name=name, **kw)


class _Background:
    """A `run --until-caught-up` on a thread; keeps its result or its error."""

    def __init__(self, pipeline: Any, spark: Any, **options: Any) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(pipeline, spark, options),
                                       daemon=True)
        self.thread.start()

    def _run(self, pipeline: Any, spark: Any, options: dict[str, Any]) -> None:
        try:
            self.result = run(pipeline, spark, **options)
        except BaseException as exc:  # handed to the test thread
            self.error = exc


def _stream_commits(workdir: Path) -> int:
    commits = workdir / "checkpoint" / "stream" / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0


def _restart_mid_stream(server: ThrowawayMariaDB, spark: Any, workdir: Path, name: str,
                        notices: list[str]) -> tuple[Any, _Background]:
    """Snapshot, then a backlog of changes streamed in many small batches; MariaDB restarts
    once two of them are committed."""
    _database(server, name)
    pipeline = _pipeline(server, name, workdir, name, max_rows=30)
    run(pipeline, spark)  # the snapshot: what follows is streamed
    with server.root_connection() as root:
        apply_changes(root, name, rounds=150, first_new_id=500_000)
    committed = _stream_commits(workdir)
    background = _Background(pipeline, spark, on_notice=notices.append)
    deadline = time.monotonic() + 180
    while _stream_commits(workdir) < committed + 2:
        if not background.thread.is_alive():
            raise SetupError(f"the run ended before the restart: {background.error!r}")
        if time.monotonic() > deadline:
            raise SetupError("no stream batch committed within 180 s")
        time.sleep(0.05)
    if not background.thread.is_alive():
        raise SetupError("the run caught up before the restart")
    server.restart()
    background.thread.join(timeout=300)
    if background.thread.is_alive():
        raise SetupError("the run did not end within 300 s of the restart")
    return pipeline, background


def test_restart_mid_run_reconnects_with_backoff_then_verify_equal(server, spark, tmp_path):
    notices: list[str] = []
    pipeline, background = _restart_mid_stream(server, spark, tmp_path, "restart", notices)
    assert background.error is None, f"the run stopped: {background.error!r}"
    # The restart did land mid-stream: the run saw it and retried.
    retried = [n for n in notices if n.startswith("transient error")]
    assert retried and "retrying in" in retried[0], notices
    assert background.result.snapshot_rows == 0  # resumed from the checkpoint, no new copy
    report = verify_pipeline(pipeline)
    assert report.equal, "\n".join(report.describe())


def _purge_all_but_newest(root: Any) -> None:
    """PURGE up to a fresh binlog file; MariaDB skips a file until its binlog checkpoint
    (InnoDB flushed the redo of its transactions, ~1 s), so retry until the old one is gone."""
    with root.cursor() as cursor:
        cursor.execute("SHOW BINARY LOGS")
        old = [row[0] for row in cursor.fetchall()]
        cursor.execute("FLUSH BINARY LOGS")
        cursor.execute("FLUSH BINARY LOGS")
        cursor.execute("SHOW MASTER STATUS")
        newest = cursor.fetchone()[0]
        deadline = time.monotonic() + 20
        while True:
            cursor.execute(f"PURGE BINARY LOGS TO '{newest}'")  # a file name, not a value
            cursor.execute("SHOW BINARY LOGS")
            if not set(old) & {row[0] for row in cursor.fetchall()}:
                return
            if time.monotonic() > deadline:
                raise SetupError("PURGE BINARY LOGS never removed the old files")
            time.sleep(0.2)


def _purged_gap(server: ThrowawayMariaDB, spark: Any, workdir: Path, name: str
                ) -> tuple[Any, BinlogGoneError]:
    """Replicate, then changes (deletes among them) whose binlog is purged before the next run."""
    _database(server, name)
    pipeline = _pipeline(server, name, workdir, name)
    if run(pipeline, spark).snapshot_rows != 30 + 200 + 40:
        raise SetupError("the first run did not copy every row")
    with server.root_connection() as root:
        apply_changes(root, name, rounds=10, first_new_id=700_000)
        _purge_all_but_newest(root)
    with pytest.raises(BinlogGoneError) as gone:
        run(pipeline, spark)
    return pipeline, gone.value


def test_purged_binlog_names_the_gap_and_snapshot_always(server, spark, tmp_path):
    _, gone = _purged_gap(server, spark, tmp_path, "purged")
    # Names the missing file and position: the gap the user has to re-copy.
    assert re.search(r"binlog file mysql-bin\.\d+ \(position mysql-bin\.\d+:\d+\) is no longer "
                     r"on the server \(oldest binlog: mysql-bin\.\d+\)", gone.message), gone.message
    assert "--snapshot always" in (gone.hint or "")


def test_snapshot_always_after_a_purged_gap_converges(server, spark, tmp_path):
    pipeline, _ = _purged_gap(server, spark, tmp_path, "purged_resnapshot")
    again = run(pipeline, spark, snapshot="always")
    assert again.snapshot_rows > 0
    report = verify_pipeline(pipeline)
    # Rows deleted in the source during the gap are gone from the target too.
    assert report.equal, "\n".join(report.describe())


def test_a_lost_checkpoint_over_copies_whose_binlog_is_purged_stops_naming_them(
        server, spark, tmp_path):
    """No checkpoint and no stream batch: the run would resume from the tables' finished
    copies (engine.start), but the binlog after them is gone. It stops
    before applying or copying anything, instead of starting over (with `start: latest`, a
    silent loss)."""
    name = "purged_copies"
    _database(server, name)
    pipeline = _pipeline(server, name, tmp_path, name)
    if run(pipeline, spark).snapshot_rows != 30 + 200 + 40:
        raise SetupError("the first run did not copy every row")
    with server.root_connection() as root:
        apply_changes(root, name, rounds=3, first_new_id=700_000)
        _purge_all_but_newest(root)
    shutil.rmtree(tmp_path / "checkpoint")
    with pytest.raises(BinlogGoneError) as gone:
        run(pipeline, spark)
    assert re.search(r"^no checkpoint in \S+; the target's state records the copies of 3 "
                     r"table\(s\) at mysql-bin\.\d+:\d+, but binlog file mysql-bin\.\d+ "
                     r"\(position mysql-bin\.\d+:\d+\) is no longer on the server",
                     gone.value.message), gone.value.message
    assert "--snapshot always" in (gone.value.hint or "")


def _dropped_by_a_second_reader(server: ThrowawayMariaDB, name: str) -> SourceError:
    """Two binlog readers with one server_id: MySQL drops the older one. Its error."""
    from replicator.source.binlog import read_changes
    from replicator.source.positions import current_position

    _database(server, name)
    source = server.source()
    start = current_position(source)
    with server.root_connection(name) as root, root.cursor() as cursor:
        # ~16 MB of binlog: more than the first reader can hold in its socket buffers.
        for batch in range(16):
            cursor.execute("INSERT INTO awkward (id, raw) SELECT seq, REPEAT('x', 65000) FROM "
                           f"seq_{batch * 16 + 1000}_to_{batch * 16 + 1015}")
    tables = [f"{name}.awkward"]
    # A short write timeout for the stalled first dump: MariaDB lets the second reader in only
    # once the first dump thread, killed as a duplicate, gives up its blocked write (60 s by
    # default).
    first = read_changes(source, start=start, end=None, tables=tables, server_id=4242,
                         pause_tolerance_s=3)
    next(first)
    second = list(read_changes(source, start=start, end=None, tables=tables, server_id=4242))
    if len(second) != 256:  # the newer reader wins
        raise SetupError(f"the second reader read {len(second)} changes, not 256")
    with pytest.raises(SourceError) as dropped:
        for _ in first:
            pass
    return dropped.value


def test_second_reader_with_the_same_server_id_gets_a_clear_message(server):
    """The dropped reader stops with a replicator error that names the duplicate server_id
    and the setting (no driver traceback, no silent reconnect mid-transaction)."""
    dropped = _dropped_by_a_second_reader(server, "same_id")
    assert "server_id 4242" in dropped.message, dropped.message
    assert "source.mysql.server_id" in (dropped.hint or ""), dropped.hint
