"""verify on a 50k-row table: key ranges of 10k rows, only the ranges holding a tampered key
are narrowed down, and the differing keys come out exact. Prints the time taken."""

from __future__ import annotations

import textwrap
import time

import pytest

from replicator.verify import verify_pipeline
from tests.integration.verify_support import load, open_target, replicate_by_snapshot

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

ROWS = 50_000


def test_fifty_thousand_rows_narrowed_to_the_differing_keys(mariadb, fresh_database, tmp_path):
    with mariadb.root_connection(fresh_database) as root, root.cursor() as cursor:
        cursor.execute("CREATE TABLE big (id INT PRIMARY KEY, label VARCHAR(40) NOT NULL, "
                       "amount DECIMAL(12,2) NULL, at DATETIME(6) NULL, "
                       "seen TIMESTAMP(3) NULL DEFAULT NULL)")
        # MariaDB's Sequence engine: the rows come from the server, not from Python.
        cursor.execute(f"INSERT INTO big SELECT seq, CONCAT('row ', seq), seq / 100, "
                       f"'2024-01-01' + INTERVAL seq SECOND, "
                       f"'2024-06-01 12:00:00.125' + INTERVAL seq MINUTE FROM seq_1_to_{ROWS}")
    path = tmp_path / "big.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: big
        source:
          mysql:
            host: 127.0.0.1
            port: ${{MYSQL_PORT}}
            user: replicator
            password: ${{MYSQL_PASSWORD}}
        target: {{duckdb: {{path: {tmp_path / 'w.duckdb'}}}}}
        tables: [{{source: {fresh_database}.big}}]
        """))
    pipeline = load(path, mariadb)
    sink = open_target(pipeline)
    try:
        replicate_by_snapshot(pipeline, sink, chunk_rows=25_000)
        started = time.perf_counter()
        equal = verify_pipeline(pipeline, sink=sink, segment_rows=10_000, checksums=False)
        seconds_equal = time.perf_counter() - started
        assert equal.equal and equal.table("big").source_rows == ROWS
        assert equal.table("big").segments == ROWS // 10_000 + 1  # the last range is open-ended

        target = sink.connection
        target.execute('DELETE FROM main."BIG" WHERE "ID" = 12345')
        target.execute('UPDATE main."BIG" SET "LABEL" = \'x\' WHERE "ID" = 12346')
        target.execute('UPDATE main."BIG" SET "SEEN" = "SEEN" + INTERVAL 1 MILLISECOND '
                       'WHERE "ID" = 49999')
        target.execute('INSERT INTO main."BIG" ("ID", "LABEL") VALUES (60000, \'extra\')')
        started = time.perf_counter()
        report = verify_pipeline(pipeline, sink=sink, segment_rows=10_000, checksums=False)
        seconds_different = time.perf_counter() - started
    finally:
        sink.close()
    big = report.table("big")
    found = sorted((d.key["id"], d.kind, tuple(c.target_column for c in d.columns))
                   for d in big.differences)
    assert found == [(12345, "missing", ()), (12346, "different", ("LABEL",)),
                     (49999, "different", ("SEEN",)), (60000, "extra", ())]
    assert big.differing_segments == 3  # 10k-20k, 40k-50k, and the open end
    print(f"\nverify {ROWS} rows: equal in {seconds_equal:.2f}s, "
          f"4 differences found in {seconds_different:.2f}s")
