"""Issue 31's property: equal data gives equal checksums. Random rows of awkward values
(hypothesis) written to MariaDB, replicated into DuckDB the way the engine's snapshot stages
them, then every row's canonical text computed by each database (``verify.checksum``) must
be the same, and verify by checksum says equal without fetching a row.

The example-based tests (``test_verify_checksum.py``) pin the extremes and prove that any
single changed value is found; this one looks for values nobody thought of. A FLOAT's 6
significant digits could in theory round apart on the two sides when its 7th digit onwards
sits within a double's error of one half (docs/verify.md: that costs a fetch, never a wrong
verdict); no random float32 has hit it here."""

from __future__ import annotations

import datetime as dt
import itertools
import string
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.context import Context
from replicator.model.changes import BinlogPosition
from replicator.verify import verify_pipeline
from replicator.verify.compare import TableVerifier
from tests.integration.verify_support import (
    load,
    open_target,
    pipeline_file,
    recreate_database,
)

pytestmark = [pytest.mark.mysql]

DDL = """CREATE TABLE prop (
    id INT PRIMARY KEY,
    i BIGINT NULL,
    u BIGINT UNSIGNED NULL,
    n INT NOT NULL,
    d DECIMAL(20,6) NULL,
    dt DATETIME(6) NULL,
    ts TIMESTAMP(6) NULL DEFAULT NULL,
    day DATE NULL,
    s VARCHAR(20) CHARACTER SET utf8mb4 NULL,
    s_nn VARCHAR(20) CHARACTER SET utf8mb4 NOT NULL,
    l VARCHAR(20) CHARACTER SET latin1 NULL,
    b VARBINARY(16) NULL,
    dbl DOUBLE NULL,
    flag TINYINT(1) NULL,
    bits BIT(10) NULL,
    e ENUM('a', 'b|', '', 'None') NULL,
    tm TIME(3) NULL,
    f FLOAT NULL
)"""

COLUMNS = ("i", "u", "n", "d", "dt", "ts", "day", "s", "s_nn", "l", "b", "dbl", "flag", "bits",
           "e", "tm", "f")


def _time_text(millis: int) -> str:
    sign = "-" if millis < 0 else ""
    millis = abs(millis)
    seconds, fraction = divmod(millis, 1000)
    return f"{sign}{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{fraction:03d}"


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
VALUES = {
    "i": st.integers(-2**63, 2**63 - 1),
    "u": st.integers(0, 2**64 - 1),
    "n": st.integers(-2**31, 2**31 - 1),
    "d": st.decimals(min_value=Decimal(-10**14) + 1, max_value=Decimal(10**14) - 1, places=6,
                     allow_nan=False, allow_infinity=False),
    "dt": st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)),
    "ts": st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2038, 1, 18)),
    "day": st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31)),
    "s": TEXT,
    "s_nn": TEXT,
    "l": st.text(string.printable + "éñüß€", max_size=20),
    "b": st.binary(max_size=16),
    "dbl": st.floats(allow_nan=False, allow_infinity=False),
    "flag": st.sampled_from([0, 1, -1, 2, 127, -128]),
    "bits": st.integers(0, 1023),
    "e": st.sampled_from(["a", "b|", "", "None"]),
    "tm": st.integers(-(838 * 3600 + 59 * 60 + 59) * 1000, (838 * 3600 + 59 * 60 + 59) * 1000
                      ).map(_time_text),
    "f": st.floats(width=32, allow_nan=False, allow_infinity=False),
}
NOT_NULL = {"n", "s_nn"}
ROW = st.fixed_dictionaries({c: v if c in NOT_NULL else st.none() | v
                             for c, v in VALUES.items()})


@pytest.fixture(scope="module")
def prop(mariadb, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("checksum_properties")
    database = "verify_checksum_properties"
    root = mariadb.root_connection()
    with root.cursor() as cursor:
        recreate_database(cursor, database)
        cursor.execute(DDL)
    pipeline = load(pipeline_file(tmp_path, database, tables="  - source: {database}.prop\n"),
                    mariadb)
    sink = open_target(pipeline)
    sink.prepare()
    yield pipeline, sink, root, database, itertools.count(1)
    sink.close()
    with root.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{database}`")
    root.close()


def _replicate(pipeline, sink, batch_id: int) -> None:
    """The table copied as the engine's snapshot copies it; a batch id of its own each time
    (an applied id is skipped by the sink's exactly-once lookup)."""
    from replicator.source.positions import current_position
    from replicator.source.snapshot import plan_chunks, read_chunk
    from tests.fixtures.row_transforms import stage_events

    context = Context(pipeline)
    table = context.plan.tables[0]
    source_table = context.catalog.table(table.source_database, table.source_table)
    position = current_position(pipeline.source)
    sink.connection.execute(f'DELETE FROM main."{table.target_table}"')
    for chunk in plan_chunks(pipeline.source, source_table, chunk_rows=1_000):
        events = list(read_chunk(pipeline.source, source_table, chunk, position=position))
        sink.apply(table, -batch_id * 1_000 - chunk.index, BinlogPosition.to_offset(position),
                   stage_events(table, events))


# Derandomized: CI runs the same 40 examples every time (300 random ones and 300 more with
# the FLOAT passed when this was written); a local run with another seed hunts further.
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(rows=st.lists(ROW, min_size=1, max_size=25))
def test_equal_rows_have_equal_canonical_text_and_checksums(prop, rows):
    pipeline, sink, root, database, batches = prop
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute("DELETE FROM prop")
        names = ", ".join(f"`{c}`" for c in ("id", *COLUMNS))
        marks = ", ".join(["%s"] * (len(COLUMNS) + 1))
        cursor.executemany(f"INSERT INTO prop ({names}) VALUES ({marks})",
                           [[number, *(row[c] for c in COLUMNS)]
                            for number, row in enumerate(rows, start=1)])
        cursor.execute("COMMIT")
    _replicate(pipeline, sink, next(batches))

    context = Context(pipeline)
    table = context.plan.tables[0]
    source_table = context.catalog.table(table.source_database, table.source_table)
    verifier = TableVerifier(pipeline, source_table, table, sink.connection,
                             end_transaction=False, target_kind="duckdb")
    try:
        plan = verifier.checksum_plan()
        assert not isinstance(plan, list), plan
        source = dict(verifier.source.query(
            f"SELECT `id`, {plan.source_text} FROM {verifier.source.relation}", []))
        target = dict(verifier.target.query(
            f'SELECT "ID", {plan.target_text} FROM main."{table.target_table}"', []))
    finally:
        verifier.close()
    source = {int(k): (v.decode() if isinstance(v, bytes) else v) for k, v in source.items()}
    assert sorted(source) == sorted(target) == list(range(1, len(rows) + 1))
    differing = {k: (source[k], target[k]) for k in source if source[k] != target[k]}
    assert not differing, differing
    (compared,) = verify_pipeline(pipeline, sink=sink).tables
    assert (compared.equal, compared.method, compared.fetched_rows) == (True, "checksum", 0)
