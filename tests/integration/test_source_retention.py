"""How long the server keeps the binlog a pipeline needs (``source.progress.retention``): the
file's rotation time (the next file's FORMAT_DESCRIPTION event) plus the server's expiry."""

from __future__ import annotations

import time

import pytest

from replicator.model.changes import BinlogPosition
from replicator.source.positions import current_position
from replicator.source.progress import retention

pytestmark = pytest.mark.mysql


def _expire(mariadb, seconds: int) -> None:
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute("SET GLOBAL binlog_expire_logs_seconds = %s", (seconds,))


def test_a_rotated_file_is_purgeable_its_expiry_after_the_rotation(mariadb, mysql_source,
                                                                   tmp_path):
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.binlog_expire_logs_seconds")
        kept = int(cursor.fetchone()[0])
    try:
        _expire(mariadb, 7 * 86_400)
        needed = current_position(mysql_source)
        before = time.time()
        with mariadb.root_connection() as root, root.cursor() as cursor:
            cursor.execute("FLUSH BINARY LOGS")
        after = time.time()

        rotated = retention(mysql_source, needed, server_id=9101)
        assert rotated.file == needed.file and rotated.expire_s == 7 * 86_400
        assert int(before) + 7 * 86_400 <= rotated.purgeable_at <= after + 1 + 7 * 86_400
        assert 6.9 * 86_400 < rotated.seconds_left(time.time()) <= 7 * 86_400
        assert "may be purged in 168.0 h" in rotated.describe(time.time())

        current = retention(mysql_source, current_position(mysql_source), server_id=9101)
        assert current.purgeable_at is None and "is being written" in current.describe(0)

        gone = retention(mysql_source, BinlogPosition("mysql-bin.000000", 4), server_id=9101)
        assert gone.purgeable_at == 0.0 and "re-snapshot" in gone.describe(0)

        # `status` shows it for a pipeline whose checkpoint is in the rotated file.
        from replicator.cli.status import collect_status
        from replicator.engine.state.checkpoint import CheckpointDir, StartState
        from replicator.model.pipeline import DuckDBTarget
        from tests.integration.e2e_support import demo_pipeline

        pipeline = demo_pipeline(mysql_source, "retention", tmp_path,
                                 DuckDBTarget(str(tmp_path / "w.duckdb")))
        checkpoint = CheckpointDir(pipeline.checkpoint_dir)
        checkpoint.create()
        checkpoint.save_start(StartState(position=needed, snapshot="skipped"))
        shown = collect_status(pipeline)["retention"]
        assert shown["file"] == needed.file and shown["seconds_left"] > 6.9 * 86_400

        # A run warns when the file it needs goes sooner than RETENTION_WARNING_S.
        from types import SimpleNamespace

        from replicator.cli.run import _retention_warning

        report = SimpleNamespace(end_offset=needed.to_offset())
        assert _retention_warning(pipeline, report) is None  # 7 days ahead
        _expire(mariadb, 3600)
        warning = _retention_warning(pipeline, report)
        assert warning and "may be purged in 1.0 h" in warning and "re-snapshot" in warning

        _expire(mariadb, 0)
        never = retention(mysql_source, needed, server_id=9101)
        assert never.purgeable_at is None and "no binlog by age" in never.describe(0)
    finally:
        _expire(mariadb, kept)
