"""A batch staged by the warehouse equals the same batch staged by the driver.

DuckDB runs the transform step itself over the landing zone's files
(``transform.file_staging``: ``INSERT INTO staging BY NAME WITH batch AS (read_parquet(...))
...``), so no row passes through the driver: a group of snapshot chunk files, and a stream
batch's files of one table. The driver's path (``stage_batch`` over Arrow slices, then a
Parquet load) is the reference: the same files, landed from the real MariaDB with awkward
values (no DECIMAL over 38 digits: DuckDB reads those as DOUBLE, so such a table takes the
driver's path, checked here too), go both ways into two DuckDB targets, in every mode, with
a filter, computed columns and masks, and (stream) several changes per key, key moves and
deletes in one batch; the targets must be equal row by row, and the warehouse's path must
really have been taken. A snapshot group also runs exactly the program `replicator plan`
prints.
"""

from __future__ import annotations

import textwrap
from decimal import Decimal
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.context import Context
from replicator.engine.apply.applier import BatchApplier
from replicator.engine.snapshot import ChunkTask, _slices, apply_group, write_chunk_file
from replicator.engine.state.checkpoint import CheckpointDir, snapshot_batch_id
from replicator.model.changes import BinlogPosition
from replicator.plan.program import fresh_copy
from replicator.plan.statements.names import log_name, target_name
from replicator.source.snapshot import plan_chunks
from tests.integration.test_source_values import insert_awkward

pytestmark = pytest.mark.mysql

POSITION = BinlogPosition("mysql-bin.000001", 4)
# The awkward rows of test_source_values (ids 1, 2) and more, so a group has several chunks.
MORE = ("INSERT INTO awkward (id, dec2, bu, tx, nn, dt6, js, st, bt, en) "
        "SELECT seq, seq / 7, seq * 1000003, CONCAT('row ', seq, ' it''s \\\\ 🚀'), "
        "IF(seq MOD 3 = 0, NULL, 'None'), TIMESTAMP('2024-02-29') + INTERVAL seq SECOND, "
        "IF(seq MOD 2 = 0, JSON_OBJECT('n', seq), NULL), 'b,c', seq MOD 32, 'x' "
        "FROM seq_10_to_2000")

MODES = {
    "merge": """
    key: [id]
    filter: "id <> 1500"
    metadata: [op, ts, position]
    columns:
      tx: {mask: {redact: {keep_last: 3}}}
      nn: {mask: {sha256: {salt: "s3cret"}}}
      label: {expression: "concat('#', cast(id AS STRING), ':', coalesce(en, 'null'))", type: VARCHAR}
      cents: {expression: "dec2 * 100", type: "NUMBER(14,2)"}
    """,
    "soft": """
    key: [id]
    deletes: soft
    log_table: true
    """,
    "changelog": """
    mode: changelog
    filter: "id % 5 <> 0"
    """,
    "scd2": """
    mode: scd2
    track_history: [tx, dec2]
    """,
}


def _pipeline(tmp_path: Path, mariadb, database: str, mode: str, name: str,
              settings: str | None = None) -> object:
    body = textwrap.indent(textwrap.dedent(settings or MODES[mode]).strip(), "    ")
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: {name}
        source:
          mysql: {{host: 127.0.0.1, port: {mariadb.port}, user: root, password: ""}}
        target:
          duckdb: {{path: "{tmp_path / name}.duckdb"}}
        tables:
          - source: {database}.awkward
        """) + body + "\n")
    return load_pipeline(path, environ={})


def _land(context: Context, directory: Path) -> list[str]:
    (table,) = context.catalog.tables
    files = []
    for chunk in plan_chunks(context.pipeline.source, table, chunk_rows=300):
        path = str(directory / f"chunk-{chunk.index:05d}.parquet")
        write_chunk_file(context.pipeline.source, ChunkTask(table, chunk, path), POSITION)
        files.append(path)
    return files


def _copy(context: Context, files: list[str], tmp_path: Path, *, warehouse: bool,
          fresh: bool = False) -> list[tuple]:
    plan = context.plan
    sink = context.open_sink(plan)
    sink.prepare()
    (table,) = plan.tables
    applier = BatchApplier(context.pipeline, plan, sink, CheckpointDir(str(tmp_path / "cp")))
    if warehouse:  # the driver's path must not be taken
        def refused(*args, **kwargs):
            raise AssertionError("the group was staged by the driver")

        applier.apply_snapshot_batches = refused
    try:
        for start in range(0, len(files), 4):
            group = files[start:start + 4]
            if warehouse:
                apply_group(applier, table, start, group, POSITION, fresh=fresh)
            else:
                applier.apply_snapshot_batches(table, start, _slices(group), POSITION)
        names = [c.target_column for c in table.columns
                 if c.target_column.upper() not in ("_SYNCED_AT",)]
        select = ", ".join(f'"{n}"' for n in names)
        rows = sink.connection.execute(
            f"SELECT {select} FROM {target_name(table, sink.dialect)} ORDER BY ALL").fetchall()
        if table.log_table:
            rows += sink.connection.execute(
                f"SELECT * FROM {log_name(table, sink.dialect)} ORDER BY ALL").fetchall()
        return rows
    finally:
        sink.close()


@pytest.fixture
def awkward(mariadb, fresh_database):
    insert_awkward(mariadb, fresh_database)  # creates the table
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("ALTER TABLE awkward DROP COLUMN dec65")
        cursor.execute(MORE)
    return fresh_database


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_warehouse_stages_a_snapshot_group_as_the_driver_does(
        mariadb, awkward, tmp_path, mode):
    landed = tmp_path / "landed"
    reference = Context(_pipeline(tmp_path, mariadb, awkward, mode, "driver"))
    files = _land(reference, landed)
    assert len(files) > 4  # several groups, several chunks each
    expected = _copy(reference, files, tmp_path / "a", warehouse=False)
    warehouse = Context(_pipeline(tmp_path, mariadb, awkward, mode, "warehouse"))
    got = _copy(warehouse, files, tmp_path / "b", warehouse=True)
    assert len(expected) > 1000
    assert got == expected
    if fresh_copy(warehouse.plan.tables[0]):  # into an empty target: INSERT, not MERGE
        inserted = Context(_pipeline(tmp_path, mariadb, awkward, mode, "inserted"))
        assert _copy(inserted, files, tmp_path / "c", warehouse=True, fresh=True) == expected


def test_decimals_over_38_digits_are_staged_by_the_driver(mariadb, fresh_database, tmp_path):
    insert_awkward(mariadb, fresh_database)
    context = Context(_pipeline(tmp_path, mariadb, fresh_database, "soft", "wide"))
    files = _land(context, tmp_path / "landed")
    plan = context.plan
    sink = context.open_sink(plan)
    sink.prepare()
    applier = BatchApplier(context.pipeline, plan, sink, CheckpointDir(str(tmp_path / "cp")))
    taken = []
    applier.apply_snapshot_files = lambda *a, **k: taken.append("warehouse")
    try:
        apply_group(applier, plan.tables[0], 0, files, POSITION)
        (value,) = sink.connection.execute(
            f'SELECT "DEC65" FROM {target_name(plan.tables[0], sink.dialect)} WHERE "ID" = 1'
        ).fetchone()
    finally:
        sink.close()
    assert taken == []
    assert str(value) == "12345678901234567890123456789012345.123456789012345678901234567890"


def test_a_snapshot_group_runs_exactly_the_program_plan_prints(mariadb, awkward, tmp_path):
    import duckdb

    from replicator.engine.state.lease import take_lease
    from replicator.plan import program
    from replicator.sink.duckdb import DuckDBSink
    from replicator.transform import snapshot_staging
    from tests.integration.test_sink_program import RecordingConnection

    context = Context(_pipeline(tmp_path, mariadb, awkward, "merge", "captured"))
    files = _land(context, tmp_path / "landed")[:4]
    plan = context.plan
    (table,) = plan.tables
    recording = RecordingConnection(duckdb.connect(str(tmp_path / "captured.duckdb")))
    sink = DuckDBSink(context.pipeline, plan, connection=recording)
    sink.prepare()
    lease = take_lease(sink, context.pipeline.name)  # as every run does: batches are fenced
    recording.take()
    applier = BatchApplier(context.pipeline, plan, sink, CheckpointDir(str(tmp_path / "cp")))
    try:
        apply_group(applier, table, 0, files[:2], POSITION)
        merged = recording.take()
        apply_group(applier, table, 2, files[2:], POSITION, fresh=True)  # keys not there yet
        inserted = recording.take()
    finally:
        sink.close()
    # What `replicator plan` prints for this table: its query comes from the catalog, the
    # run's from the chunk files' Arrow schema.
    planned = snapshot_staging(table, context.catalog, sink.dialect)
    assert planned is not None
    for executed, number, group, fresh in ((merged, 0, files[:2], False),
                                           (inserted, 2, files[2:], True)):
        key = program.BatchKey(context.pipeline.name, table.target_table,
                               snapshot_batch_id(0, number), POSITION.to_offset())
        expected = [(s.sql, tuple(s.params)) for s in program.batch_program(
            table, sink.dialect, key, group, query=planned, fresh=fresh,
            generation=lease.generation)]
        assert executed == expected
        assert any("_LEASE" in sql and params[-1] == lease.generation for sql, params in executed)
        assert any("read_parquet" in sql for sql, _ in executed)
        assert any(sql.startswith("MERGE" if not fresh else "INSERT INTO \"MAIN\"")
                   for sql, _ in executed)
        assert "s3cret" not in "\n".join(sql for sql, _ in executed)  # a parameter


# -- the stream: a batch's landed files of one table, staged by the warehouse ----------------

WORKLOAD = [  # several changes per key in one batch, key moves, deletes, awkward values
    "UPDATE awkward SET tx = CONCAT(tx, ' ✓ it''s'), dec2 = dec2 + 1 WHERE id % 3 = 0",
    "UPDATE awkward SET id = id + 100000 WHERE id % 7 = 0",  # the key moves
    "DELETE FROM awkward WHERE id % 11 = 0",
    "INSERT INTO awkward (id, tx, nn, js, dt6) VALUES (99, 'back\\\\slash \"q\"', 'None', "
    "'{\"k\": [1, null]}', '2024-02-29 23:59:59.999999')",
    "UPDATE awkward SET nn = NULL, tx = 'again' WHERE id = 99",
    "UPDATE awkward SET tx = 'moved again', id = 200099 WHERE id = 99",
    "DELETE FROM awkward WHERE id = 1",
    "INSERT INTO awkward (id, tx) VALUES (1, 'back after its delete')",
]


def _stream(context: Context, tmp_path: Path, manifest: list[dict], *, warehouse: bool
            ) -> list[tuple]:
    plan = context.plan
    sink = context.open_sink(plan)
    sink.prepare()
    (table,) = plan.tables
    applier = BatchApplier(context.pipeline, plan, sink, CheckpointDir(str(tmp_path / "cp")))
    applier.landing = str(tmp_path.parent / "landing")
    taken = []
    original = applier._in_warehouse
    applier._in_warehouse = (
        (lambda *a: taken.append(original(*a)) or taken[-1]) if warehouse else (lambda *a: None))
    if warehouse:  # the warehouse's statement must apply it, not the driver's road after it
        def refused(*args, **kwargs):
            raise AssertionError("the batch was staged by the driver")

        applier._staged_by_driver = refused
    try:
        applier.apply_manifest(manifest, 0, {"file": "x", "pos": 4})
        assert [found is not None for found in taken] == ([True] if warehouse else [])
        names = [c.target_column for c in table.columns
                 if c.target_column.upper() != "_SYNCED_AT"]
        rows = sink.connection.execute(
            f"SELECT {', '.join(repr(n).replace(chr(39), chr(34)) for n in names)} "
            f"FROM {target_name(table, sink.dialect)} ORDER BY ALL").fetchall()
        if table.log_table:
            rows += sink.connection.execute(
                f"SELECT * FROM {log_name(table, sink.dialect)} ORDER BY ALL").fetchall()
        return rows
    finally:
        sink.close()


@pytest.mark.parametrize("mode", sorted(MODES))
def test_the_warehouse_stages_a_stream_batch_as_the_driver_does(mariadb, awkward, tmp_path, mode):
    from replicator.engine.job.landing import land_range
    from replicator.model.selection import TableSelector
    from replicator.source.fast.columnar import KeyColumns
    from replicator.source.positions import current_position

    start = current_position(mariadb.source())
    with mariadb.root_connection(awkward) as connection, connection.cursor() as cursor:
        for sql in WORKLOAD:
            cursor.execute(sql)
    end = current_position(mariadb.source())
    reference = Context(_pipeline(tmp_path, mariadb, awkward, mode, "driver"))
    manifest = land_range(
        reference.pipeline.source, start=start, end=end,
        tables=TableSelector.of([f"{awkward}.awkward"]), keys=KeyColumns({}), server_id=7301,
        root=str(tmp_path / "landing"), epoch=0, part=0)
    assert sum(int(r["rows"]) for r in manifest if r["kind"] == "rows") > 1000
    expected = _stream(reference, tmp_path / "a", manifest, warehouse=False)
    got = _stream(Context(_pipeline(tmp_path, mariadb, awkward, mode, "warehouse")),
                  tmp_path / "b", manifest, warehouse=True)
    assert len(expected) > 100
    assert got == expected


OVERFLOW = """
    key: [id]
    columns:
      big: {expression: "dec2 * 100000", type: "NUMBER(14,2)"}
    """


def test_a_change_the_merge_drops_may_fail_the_warehouse_statement_then_the_driver_applies(
        mariadb, awkward, tmp_path):
    """The warehouse's statement over change files stages every change and the MERGE keeps
    the last per key (docs/decisions/duckdb-apply-last-change.md): a computed column that
    overflows on a change a later change of its key supersedes fails that statement, and the
    driver's road, which drops the superseded change first, applies the batch."""
    from replicator.engine.job.landing import land_range
    from replicator.model.selection import TableSelector
    from replicator.source.fast.columnar import KeyColumns
    from replicator.source.positions import current_position

    start = current_position(mariadb.source())
    with mariadb.root_connection(awkward) as connection, connection.cursor() as cursor:
        cursor.execute("UPDATE awkward SET dec2 = 99999999.99 WHERE id = 10")  # 1e13: too big
        cursor.execute("UPDATE awkward SET dec2 = 1.25 WHERE id = 10")
    end = current_position(mariadb.source())
    context = Context(_pipeline(tmp_path, mariadb, awkward, "", "overflow", OVERFLOW))
    manifest = land_range(
        context.pipeline.source, start=start, end=end,
        tables=TableSelector.of([f"{awkward}.awkward"]), keys=KeyColumns({}), server_id=7302,
        root=str(tmp_path / "landing"), epoch=0, part=0)
    sink = context.open_sink(context.plan)
    sink.prepare()
    applier = BatchApplier(context.pipeline, context.plan, sink, CheckpointDir(str(tmp_path / "cp")))
    applier.landing = str(tmp_path / "landing")
    warehouse, driver = applier._in_warehouse, applier._staged_by_driver
    roads: list[str] = []
    applier._in_warehouse = lambda *a: roads.append("warehouse") or warehouse(*a)
    applier._staged_by_driver = lambda *a: roads.append("driver") or driver(*a)
    try:
        applier.apply_manifest(manifest, 0, {"file": "x", "pos": 4})
        rows = sink.connection.execute(
            f"SELECT ID, BIG FROM {target_name(context.plan.tables[0], sink.dialect)} "
            "WHERE ID = 10").fetchall()
    finally:
        sink.close()
    assert roads == ["warehouse", "driver"]
    assert rows == [(10, Decimal("125000.00"))]
