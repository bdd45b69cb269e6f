"""Change files reach Snowflake from the object-store landing zone through the user's external
stage, not through the driver (``target.snowflake.stage``, ``plan.statements.stage_copy``).

moto's S3 server is the object store (``tests.fixtures.s3_landing``); the batches are landed
there by the product's own code (``engine.landing``), and the driver side runs as in a stream
(``BatchApplier.apply_manifest``) against fakesnow's HTTP server through the real connector.
The same batches go once through the external stage and once through the driver's staging
(PUT + COPY, the reference) into two databases: the targets must be equal row by row, with
awkward values, several changes per key in one batch, a key move, deletes, a soft-delete
table. The staged run must never PUT, and runs exactly the program ``replicator plan``
prints. A batch whose raw load committed before the run died (between the COPY and the
MERGE) is loaded once when replayed, and a replay of a committed batch is skipped.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import uuid
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replicator.engine.apply.applier import BatchApplier
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.errors import PlanError
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import (
    ColumnMapping,
    EngineConfig,
    MySQLSource,
    OutboxColumn,
    OutboxRoute,
    OutboxSpec,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    TargetConfig,
)
from replicator.model.selection import TableSelection
from replicator.plan import build_plan, program
from replicator.plan.dialects import pipeline_dialect
from replicator.plan.render import render_sql
from replicator.plan.statements.names import target_name
from replicator.sink.snowflake import SnowflakeSink
from replicator.transform.stage import external_staging
from tests.fixtures.landed import land_events

pytestmark = pytest.mark.usefixtures("s3_endpoint")

ITEMS = [
    ("id", "bigint(20) unsigned", False),
    ("name", "varchar(100)", True),
    ("amount", "decimal(38,10)", True),
    ("created", "datetime(6)", True),
    ("updated_at", "timestamp(6)", True),
    ("doc", "json", True),
    ("payload", "blob", True),
    ("status", "enum('new','paid','it''s')", True),
    ("dur", "time(6)", True),
    ("born", "date", True),
    ("yr", "year", True),
    ("ratio", "double", True),
    ("active", "tinyint(1)", True),
    ("big_neg", "bigint(20)", True),
]
PEOPLE = [("id", "int(11)", False), ("nick", "varchar(20)", True)]
# The tables the external-stage load leaves to the driver (R312): an outbox and a table
# with dead letters.
OUTBOX = [("id", "bigint(20)", False), ("kind", "varchar(20)", True), ("payload", "json", True)]
NOTES = [("id", "int(11)", False), ("body", "longblob", True)]


def _table(name: str, columns: list[tuple[str, str, bool]]) -> SourceTable:
    return SourceTable(database="shop", table=name, primary_key=("id",), columns=tuple(
        SourceColumn(name=c, mysql_type=MySQLType.parse(t), nullable=n, ordinal=i)
        for i, (c, t, n) in enumerate(columns, start=1)))


CATALOG = Catalog(tables=(_table("items", ITEMS), _table("people", PEOPLE),
                          _table("items_b", ITEMS), _table("outbox", OUTBOX),
                          _table("notes", NOTES)))
STAGE = "STAGEDB.RAW.LANDING"


def _pipeline(fakesnow_server: Any, database: str, landing: str, *, stage: str | None,
              tables: tuple[TablePipeline, ...] | None = None) -> Pipeline:
    return Pipeline(
        name="staged",
        source=MySQLSource(),
        target=TargetConfig(warehouse=SnowflakeTarget(
            database=database, schema="RAW", account=fakesnow_server.account, stage=stage)),
        tables=tables or (
            TablePipeline(source_database="shop", source_table="items",
                          metadata=("op", "ts", "position")),
            TablePipeline(source_database="shop", source_table="people", deletes="soft"),
        ),
        engine=EngineConfig(landing=landing),
    )


AWKWARD = {
    "name": "it's \\ \"quoted\" 🚀\nline", "amount": Decimal("-1234567890123456789012345678.0123456789"),
    "created": dt.datetime(1970, 1, 1, 0, 0, 0, 1), "doc": '{"a": [1, "ü"], "b": null}',
    "updated_at": dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
    "payload": b"\x00\xff'\"\\", "status": "it's", "dur": dt.timedelta(hours=-838, minutes=-59),
    "born": dt.date(1000, 1, 1), "yr": 2155, "ratio": 1e-300, "active": 1,
    "big_neg": -9223372036854775808,
}


def _row(key: int, **values: Any) -> dict[str, Any]:
    row = {name: None for name, _, _ in ITEMS}
    return {**row, "id": key, **values}


def _events(number: int) -> list[ChangeEvent]:
    """Batch ``number``: several changes per key, a key move, deletes, NULLs."""
    at = BinlogPosition("mysql-bin.000001", 1000 * number)
    ts = 1_700_000_000_000 + number * 1000

    def event(op: str, index: int, table: str = "shop.items", **images: Any) -> ChangeEvent:
        return ChangeEvent(table, op, at, index, ts, **images)

    if number == 1:
        return [
            event("c", 0, after=_row(1, **AWKWARD)),
            event("c", 1, after=_row(2, name="two", amount=Decimal("0.0000000001"))),
            event("c", 2, after=_row(3, name="three")),
            event("u", 3, before=_row(2, name="two"), after=_row(2, name="two again", active=0)),
            event("c", 4, after=_row(18446744073709551615, name="max key")),
            event("c", 5, table="shop.people", after={"id": 1, "nick": "a"}),
            event("c", 6, table="shop.people", after={"id": 2, "nick": "b"}),
        ]
    return [
        event("u", 0, before=_row(3, name="three"), after=_row(30, name="moved")),  # key move
        event("d", 1, before=_row(1, **AWKWARD)),
        event("c", 2, after=_row(1, name="back", ratio=float("inf"))),
        event("d", 3, before=_row(18446744073709551615, name="max key")),
        event("u", 4, table="shop.people", before={"id": 1, "nick": "a"},
              after={"id": 1, "nick": "a2"}),
        event("d", 5, table="shop.people", before={"id": 2, "nick": "b"}),
    ]


def _applier(fakesnow_server: Any, database: str, landing: str, tmp_path: Path, *,
             stage: str | None, tables: tuple[TablePipeline, ...] | None = None
             ) -> BatchApplier:
    pipeline = _pipeline(fakesnow_server, database, landing, stage=stage, tables=tables)
    plan = build_plan(pipeline, CATALOG)
    sink = SnowflakeSink(pipeline, plan, connection=fakesnow_server.connect(
        database, "RAW", paramstyle="qmark", autocommit=False))
    sink.prepare()
    return BatchApplier(pipeline, plan, sink, CheckpointDir(tmp_path / f"cp-{database}"))


def _create_stage(fakesnow_server: Any, database: str, landing: str) -> None:
    """The user's one-time setup (docs/snowflake.md), on fakesnow: no storage integration."""
    with fakesnow_server.connect(database, "RAW") as connection:
        connection.cursor().execute(f"CREATE DATABASE IF NOT EXISTS {STAGE.split('.')[0]}")
        connection.cursor().execute(f"CREATE SCHEMA IF NOT EXISTS {STAGE.rsplit('.', 1)[0]}")
        connection.cursor().execute(f"CREATE OR REPLACE STAGE {STAGE} URL = '{landing}/'")


def _rows(applier: BatchApplier) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    cursor = applier.sink.connection.cursor()
    for table in applier.plan.tables:
        names = [c.target_column for c in table.columns if c.target_column != "_SYNCED_AT"]
        cursor.execute(f"SELECT {', '.join(chr(34) + n + chr(34) for n in names)} "
                       f"FROM {target_name(table, applier.sink.dialect)} ORDER BY 1")
        out[table.target_table] = cursor.fetchall()
    return out


def _shard_events(number: int) -> list[ChangeEvent]:
    """Batch ``number`` of shop.items_b, a shard beside shop.items (a routed target): its
    keys equal items' keys, a key move, a delete."""
    at = BinlogPosition("mysql-bin.000001", 1000 * number)
    ts = 1_700_000_000_000 + number * 1000
    if number == 1:
        return [ChangeEvent("shop.items_b", "c", at, 10, ts, after=_row(1, name="b one")),
                ChangeEvent("shop.items_b", "c", at, 11, ts, after=_row(2, name="b two"))]
    return [ChangeEvent("shop.items_b", "u", at, 10, ts, before=_row(1, name="b one"),
                        after=_row(10, name="b moved")),
            ChangeEvent("shop.items_b", "d", at, 11, ts, before=_row(2, name="b two"))]


BINARY_LIMIT = 8_388_608  # Snowflake's BINARY holds at most 8 MB (sink.limits)


def _driver_events(number: int) -> list[ChangeEvent]:
    """Batch ``number`` of the tables only the driver stages: outbox events (two routes, an
    update, a delete: not events), and a note one BINARY cannot hold (a dead letter)."""
    at = BinlogPosition("mysql-bin.000001", 1000 * number)
    ts = 1_700_000_000_000 + number * 1000

    def outbox(index: int, key: int, kind: str, payload: str, op: str = "c") -> ChangeEvent:
        row = {"id": key, "kind": kind, "payload": payload}
        return ChangeEvent("shop.outbox", op, at, 20 + index, ts,
                           before=row if op != "c" else None, after=row if op != "d" else None)

    def note(index: int, key: int, body: bytes | None, op: str = "c") -> ChangeEvent:
        row = {"id": key, "body": body}
        return ChangeEvent("shop.notes", op, at, 30 + index, ts,
                           before=row if op != "c" else None, after=row if op != "d" else None)

    if number == 1:
        return [
            outbox(0, 1, "order", '{"id": 7, "total": "12.50", "status": "new"}'),
            outbox(1, 2, "customer", '{"id": 70, "email": "a@x.org"}'),
            outbox(2, 3, "order", '{"id": 8, "total": "1.00", "status": "new"}'),
            outbox(3, 4, "order", '{"id": 7, "total": "13.00", "status": "paid"}'),
            note(0, 1, b"fits \x00\xff"),
            note(1, 2, b"\x01" * (BINARY_LIMIT + 1)),  # set aside, the rest goes on
            note(2, 3, None),
        ]
    return [
        outbox(0, 5, "order", '{"id": 8, "deleted": true}'),
        outbox(1, 1, "order", '{"id": 7}', op="d"),  # the cleanup: no event
        outbox(2, 6, "customer", '{"id": 71, "email": "b@x.org"}'),
        note(0, 1, b"fits again", op="u"),
        note(1, 3, None, op="d"),
    ]


def _apply(applier: BatchApplier, number: int) -> Any:
    events = [e for e in [*_events(number), *_shard_events(number), *_driver_events(number)]
              if any(t.reads(e.table) for t in applier.plan.tables)]
    manifest = land_events(applier, events, directory=f"stream/epoch=0/b{number}")
    return applier.apply_manifest(manifest, number, {"file": "mysql-bin.000001",
                                                     "pos": 1000 * number + 999})


def _staged_and_driver(fakesnow_server: Any, tmp_path: Path,
                       tables: tuple[TablePipeline, ...] | None = None
                       ) -> tuple[BatchApplier, BatchApplier, list[str]]:
    """Batches 1 and 2 applied through the external stage and by the driver's staging (a
    database each), and the statements the stage path sent."""
    run = uuid.uuid4().hex[:8]
    landing = f"s3://landing/{run}"
    staged_db, driver_db = f"S_{run}".upper(), f"D_{run}".upper()
    _create_stage(fakesnow_server, staged_db, landing)
    staged = _applier(fakesnow_server, staged_db, landing, tmp_path, stage=STAGE, tables=tables)
    driver = _applier(fakesnow_server, driver_db, f"s3://landing/{run}-driver", tmp_path,
                      stage=None, tables=tables)
    assert staged.sink.dialect.external_stage == STAGE and driver.sink.dialect.external_stage is None
    fakesnow_server.queries.clear()
    for number in (1, 2):
        _apply(staged, number)
    staged_queries = list(fakesnow_server.queries)
    for number in (1, 2):
        _apply(driver, number)
    return staged, driver, staged_queries


def test_batches_through_the_external_stage_equal_the_drivers(fakesnow_server, tmp_path):
    staged, driver, staged_queries = _staged_and_driver(fakesnow_server, tmp_path)

    assert _rows(staged) == _rows(driver)
    items = _rows(staged)["ITEMS"]
    assert [row[0] for row in items] == [1, 2, 30]  # 3 moved to 30; the max key deleted
    assert items[1][1] == "two again" and items[1][12] is False
    columns = [c.target_column for c in staged.plan.tables[1].columns
               if c.target_column != "_SYNCED_AT"]
    people = [dict(zip(columns, row, strict=True)) for row in _rows(staged)["PEOPLE"]]
    assert [(p["ID"], p["NICK"], p["_DELETED"]) for p in people] == [(1, "a2", False),
                                                                      (2, "b", True)]

    # No byte through the driver: no PUT, the files COPYed by name from the stage.
    assert not any(q.lstrip().upper().startswith("PUT") for q in staged_queries)
    copies = [q for q in staged_queries if q.startswith("COPY INTO")]
    assert len(copies) == 4 and all(f"FROM @{STAGE}" in q and "FILES = ('stream/epoch=0/b"
                                    in q for q in copies)


def test_the_run_executes_the_program_plan_prints(fakesnow_server, tmp_path):
    run = uuid.uuid4().hex[:8]
    landing = f"s3://landing/{run}"
    database = f"P_{run}".upper()
    _create_stage(fakesnow_server, database, landing)
    applier = _applier(fakesnow_server, database, landing, tmp_path, stage=STAGE)
    table = applier.plan.tables[1]  # people: one table per batch, the per-table program
    applier.plan = dataclasses.replace(applier.plan, tables=(table,))
    applier.sink.plan = applier.plan
    fakesnow_server.queries.clear()
    _apply(applier, 1)
    ran = fakesnow_server.queries[fakesnow_server.queries.index(
        next(q for q in fakesnow_server.queries if q.startswith("SELECT") and "_REPLICATOR_STATE" in q)):]
    printed = render_sql(table, applier.sink.dialect,
                         external_staging(table, applier.sink.dialect))
    dialect = pipeline_dialect(applier.pipeline)
    expected = program.batch_program(table, dialect, query=external_staging(table, dialect))
    for statement in expected:
        if statement.role == "fence":
            continue  # a test's sink holds no lease
        assert f"{statement.sql};" in printed or "FILES = (" in statement.sql
    shown = [s.sql for s in expected if s.role != "fence"]
    normalized = [re.sub(r"FILES = \([^)]*\)", "FILES = (...)", q) for q in ran]
    assert normalized == [re.sub(r"FILES = \([^)]*\)", "FILES = (...)", s) for s in shown]


def test_a_batch_replayed_after_its_raw_load_committed_loads_once(fakesnow_server, tmp_path):
    """The run died between the COPY (committed with the load) and the MERGE: the replay
    loads the same files again (FORCE: the load history does not skip them), merges once."""
    run = uuid.uuid4().hex[:8]
    landing = f"s3://landing/{run}"
    database = f"R_{run}".upper()
    _create_stage(fakesnow_server, database, landing)
    applier = _applier(fakesnow_server, database, landing, tmp_path, stage=STAGE)
    _apply(applier, 1)
    before = _rows(applier)

    # Batch 2 up to its load's COMMIT, on a session that then dies (no MERGE, no state row).
    manifest = land_events(applier, _events(2), directory="stream/epoch=0/b2")
    dialect = applier.sink.dialect
    with fakesnow_server.connect(database, "RAW", paramstyle="qmark", autocommit=False) as dying:
        cursor = dying.cursor()
        for table in applier.plan.tables:
            files = [row["path"] for row in manifest if table.reads(row["table"])]
            key = program.BatchKey("staged", table.target_table, 2, {})
            query = external_staging(table, dialect)
            relative = [f.split(f"{run}/", 1)[1] for f in files]
            for statement in [*program.batch_head(table, dialect, key),
                              *program.load_statements(table, dialect, relative, query=query),
                              *program.load_commit(dialect)]:
                cursor.execute(statement.sql, statement.params)
    assert _rows(applier) == before  # nothing of batch 2 reached the targets

    end = {"file": "mysql-bin.000001", "pos": 2999}
    applier.apply_manifest(manifest, 2, end)
    replayed = _rows(applier)
    assert [row[0] for row in replayed["ITEMS"]] == [1, 2, 30]
    assert len(replayed["PEOPLE"]) == 2

    fakesnow_server.queries.clear()
    applier.apply_manifest(manifest, 2, end)  # committed: the lookup skips it
    assert _rows(applier) == replayed
    assert not any(q.startswith("COPY INTO") for q in fakesnow_server.queries)


def _mixed_tables() -> tuple[TablePipeline, ...]:
    """A table the stage covers beside an outbox and a table with dead letters (R312)."""
    def route(kind: str, target: str, key: str, *columns: OutboxColumn) -> OutboxRoute:
        return OutboxRoute(kind, target, (key,), (OutboxColumn(key, "$.id", "NUMBER(20,0)"),
                                                   *columns), delete_when="$.deleted")

    return (
        TablePipeline(source_database="shop", source_table="people", deletes="soft"),
        TablePipeline(source_database="shop", source_table="outbox", mode="outbox",
                      outbox=OutboxSpec("kind", "payload", (
                          route("order", "ORDERS", "order_id",
                                OutboxColumn("total", "$.total", "NUMBER(12,2)"),
                                OutboxColumn("status", "$.status", "VARCHAR")),
                          route("customer", "CUSTOMERS", "customer_id",
                                OutboxColumn("email", "$.email", "VARCHAR"))))),
        TablePipeline(source_database="shop", source_table="notes", on_error="dead_letter"),
    )


def _dead_letters(applier: BatchApplier) -> list[tuple[Any, ...]]:
    cursor = applier.sink.connection.cursor()
    cursor.execute('SELECT "TABLE", "KEY", "COLUMN", "BINLOG_POS" FROM '
                   '"RAW"."_REPLICATOR_DEAD_LETTERS" ORDER BY "KEY"')
    return cursor.fetchall()


def test_tables_the_stage_cannot_render_are_staged_by_the_driver_in_the_same_batch(
        fakesnow_server, tmp_path):
    """Outbox routes and dead letters beside a table the stage covers, under
    target.snowflake.stage: the plan builds (R312 warnings, no error), the covered table's
    files are COPYed from the stage, the others' batches staged by the driver (PUT of the
    staged rows), each stream batch ONE transaction (target.atomic) over both roads; every
    target equals the driver-only pipeline's and the changes' expected rows."""
    staged, driver, staged_queries = _staged_and_driver(fakesnow_server, tmp_path,
                                                        _mixed_tables())
    notes = staged.plan.notes
    assert {n.code for n in notes} == {"R312"} and all(n.severity == "warning" for n in notes)
    assert {n.where for n in notes} == {("tables", 1, "outbox"), ("tables", 2, "on_error")}
    assert not driver.plan.notes

    rows = _every_row(staged)
    assert rows == _every_row(driver)
    assert [(r[0], r[1], r[2]) for r in rows["ORDERS"]] == [(7, Decimal("13.00"), "paid")]
    assert [(r[0], r[1]) for r in rows["CUSTOMERS"]] == [(70, "a@x.org"), (71, "b@x.org")]
    assert sorted((r[0], r[1]) for r in rows["NOTES"]) == [(1, b"fits again")]
    assert [(r[0], r[1]) for r in sorted(rows["PEOPLE"])][:2] == [(1, "a2"), (2, "b")]
    assert _dead_letters(staged) == _dead_letters(driver) == [
        ("NOTES", '{"ID": 2}', "BODY", 1999)]

    # The covered table: COPYed from the stage by name; the others: PUT to their staging
    # table's stage and COPYed from there, in the same transaction (one COMMIT of the
    # batch's MERGEs and state rows after the load's).
    copies = [q for q in staged_queries if q.startswith("COPY INTO")]
    assert [q for q in copies if f"FROM @{STAGE}" in q]
    assert all("_REPLICATOR_RAW_PEOPLE" in q for q in copies if f"FROM @{STAGE}" in q)
    puts = [q for q in staged_queries if q.lstrip().upper().startswith("PUT")]
    assert puts and all("@%\"" in q or "_REPLICATOR_STAGE_" in q for q in puts), puts
    assert not any("PEOPLE" in q for q in puts)
    # Per batch: the loads of both roads, their COMMIT, then every table's MERGE and state
    # row, and ONE COMMIT (target.atomic: the stage does not split the transaction).
    steps = [q.split('"RAW".', 1)[-1].split()[0] if q.startswith("MERGE") else q
             for q in staged_queries if q.startswith(("MERGE", "COMMIT"))]
    assert steps == ["COMMIT", '"PEOPLE"', '"ORDERS"', '"CUSTOMERS"', '"NOTES"', "COMMIT"] * 2


def test_an_atomic_batch_over_both_roads_replayed_after_its_load_commits_once(
        fakesnow_server, tmp_path):
    """The run died after the atomic batch's loads committed (the stage's COPY into the raw
    table and the driver's PUT + COPY into staging) and before the MERGEs: the replay loads
    both again and commits once; a replay of the committed batch is skipped whole."""
    run = uuid.uuid4().hex[:8]
    landing = f"s3://landing/{run}"
    database = f"M_{run}".upper()
    _create_stage(fakesnow_server, database, landing)
    applier = _applier(fakesnow_server, database, landing, tmp_path, stage=STAGE,
                       tables=_mixed_tables())
    _apply(applier, 1)
    before = _every_row(applier)

    # Batch 2 on a session that dies after the load's COMMIT (sink.failpoint: the run's
    # ``apply.after_load``): nothing of it reaches the targets.
    manifest = land_events(applier, [e for e in [*_events(2), *_driver_events(2)]
                                     if any(t.reads(e.table) for t in applier.plan.tables)],
                           directory="stream/epoch=0/b2")
    end = {"file": "mysql-bin.000001", "pos": 2999}

    class Died(BaseException):
        pass

    def die(name: str) -> None:
        if name == "apply.after_load":
            raise Died

    applier.sink.failpoint = die
    with pytest.raises(Died):
        applier.apply_manifest(manifest, 2, end)
    applier.sink.failpoint = None
    assert _every_row(applier) == before

    fakesnow_server.queries.clear()
    applier.apply_manifest(manifest, 2, end)
    replayed = _every_row(applier)
    loads = [q for q in fakesnow_server.queries if q.startswith("COPY INTO")]
    assert any(f"FROM @{STAGE}" in q for q in loads) and any("@%" in q or "_REPLICATOR_STAGE_"
                                                            in q for q in loads)
    assert [(r[0], r[1]) for r in replayed["CUSTOMERS"]] == [(70, "a@x.org"), (71, "b@x.org")]
    assert sorted((r[0], r[1]) for r in replayed["NOTES"]) == [(1, b"fits again")]
    assert replayed["ORDERS"] == [r for r in before["ORDERS"] if r[0] != 8]

    fakesnow_server.queries.clear()
    applier.apply_manifest(manifest, 2, end)  # committed: the lookup skips every table
    assert _every_row(applier) == replayed
    assert not any(q.startswith(("COPY INTO", "PUT", "MERGE")) for q in fakesnow_server.queries)


def test_plan_notes_the_tables_the_driver_stages_and_refuses_no_landing_zone(fakesnow_server):
    tables = (
        TablePipeline(source_database="shop", source_table="items",
                      filter="id > 1 AND upper(name) = 'X'",
                      columns=(ColumnMapping("amount", mask="md5"),)),
        TablePipeline(source_database="shop", source_table="people", mode="scd2"),
    )
    pipeline = _pipeline(fakesnow_server, "X", "s3://landing/x", stage=STAGE, tables=tables)
    plan = build_plan(pipeline, CATALOG)  # R312 is a warning: the plan is built
    assert [(n.code, n.severity, n.where) for n in plan.notes] == [
        ("R312", "warning", ("tables", 0, "filter")),
        ("R312", "warning", ("tables", 0, "columns"))]
    text = " ".join(n.message for n in plan.notes)
    assert "a mask on AMOUNT" in text and f"@{STAGE}" in text
    assert "the filter: upper() has no exact Snowflake SQL form" in text
    assert all(n.message.startswith("shop.items: its batches are staged by the driver") for n in plan.notes)
    dialect = pipeline_dialect(pipeline)
    items, people = plan.tables
    # The road is the staging query's: none for items (the driver's), one for people.
    assert external_staging(items, dialect) is None
    assert external_staging(people, dialect) is not None
    script = render_sql(items, dialect, None)
    assert "by the driver (R312)" in script and "PUT 'file://" in script
    assert "_REPLICATOR_RAW_" not in script

    # A local landing zone is fine (the executors PUT its files: engine.job.stage_put); an
    # unset one (the checkpoint's) and HDFS (no local file to PUT) are not.
    local = _pipeline(fakesnow_server, "X", "/tmp/landing", stage=STAGE)
    assert pipeline_dialect(local).executors_put and build_plan(local, CATALOG).tables
    for landing in ("", "hdfs://namenode/landing"):
        unset = _pipeline(fakesnow_server, "X", landing, stage=STAGE)
        with pytest.raises(PlanError, match=r"engine\.landing must be set"):
            build_plan(unset, CATALOG)


# Each mode the external-stage load renders (``transform.stage.external_staging``), beside
# merge and soft deletes above: the targets equal the driver's staging, row by row.
MODES = {
    "changelog": (TablePipeline(source_database="shop", source_table="items", mode="changelog"),
                  TablePipeline(source_database="shop", source_table="people",
                                mode="changelog")),
    "scd2": (TablePipeline(source_database="shop", source_table="items", mode="scd2",
                           track_history=("name", "amount")),
             TablePipeline(source_database="shop", source_table="people", mode="scd2")),
    "log table and metadata": (
        TablePipeline(source_database="shop", source_table="items", log_table=True,
                      metadata=("op", "ts", "position", "transaction", "source_table")),
        TablePipeline(source_database="shop", source_table="people", deletes="soft",
                      log_table=True)),
    "masks": (TablePipeline(source_database="shop", source_table="items", columns=(
                  ColumnMapping("name", mask="redact", mask_keep_last=2),
                  ColumnMapping("status", mask="truncate", mask_length=2))),
              TablePipeline(source_database="shop", source_table="people", columns=(
                  ColumnMapping("nick", mask="sha256", mask_salt="pepper 'ü",
                                target_type="VARCHAR(64)"),))),
    # Masks of other than text (``stage_copy._masks``): an integer's digits hashed or
    # redacted, NULL for a decimal, a double, a date and a datetime.
    "masks of numbers and dates": (TablePipeline(
        source_database="shop", source_table="items", mode="changelog", columns=(
            ColumnMapping("big_neg", mask="sha256", mask_salt="s"),
            ColumnMapping("active", mask="md5"),
            ColumnMapping("yr", mask="null"), ColumnMapping("amount", mask="null"),
            ColumnMapping("ratio", mask="null"), ColumnMapping("born", mask="null"),
            ColumnMapping("created", mask="null"))),
        TablePipeline(source_database="shop", source_table="people", columns=(
            ColumnMapping("id", mask="sha256"),))),
    "filters": (TablePipeline(source_database="shop", source_table="items", filter=(
                    "(amount >= 0.0000000001 AND name IN ('two', 'three')) "
                    "OR id BETWEEN 20 AND 40 OR NOT (name <> 'back') OR big_neg IS NOT NULL")),
                TablePipeline(source_database="shop", source_table="people", mode="changelog",
                              filter="nick <> 'b' AND id >= -1")),
    # Spark SQL beyond comparisons, rendered for Snowflake (``stage_expressions``): a
    # string function, LIKE, a decimal remainder, a double division, dates, IF, CASE.
    "computed columns and the filter language": (
        TablePipeline(source_database="shop", source_table="items", mode="changelog", filter=(
            "length(name) > 4 AND NOT name LIKE 'max%' OR id % 2 = 0"), columns=(
            ColumnMapping("label", expression="concat(substring(name, 1, 3), '-', id)",
                          target_type="VARCHAR"),
            ColumnMapping("half", expression="ratio / 2", target_type="FLOAT"),
            ColumnMapping("next_year", expression="year(born) + 1", target_type="NUMBER(10,0)"),
            ColumnMapping("age", expression="datediff(to_date(created), born)",
                          target_type="INTEGER"),
            ColumnMapping("flag", expression="if(active, 'yes', CASE WHEN big_neg < 0 "
                          "THEN 'neg' END)", target_type="VARCHAR"),
            ColumnMapping("cents", expression="round(amount, 2)", target_type="NUMBER(38,2)"))),
        TablePipeline(source_database="shop", source_table="people", mode="changelog",
                      filter="coalesce(nick, '') <> 'b'", columns=(
            ColumnMapping("nick_len", expression="length(nick) * 10 - id",
                          target_type="NUMBER(12,0)"),))),
    "routed": (TablePipeline(source_database="", source_table="", target_table="ALL_ITEMS",
                             selection=TableSelection((r"shop\.items.*",))),),
}


def _every_row(applier: BatchApplier) -> dict[str, list[tuple[Any, ...]]]:
    """Every target and log table's rows but the apply time, in one order."""
    out = {}
    cursor = applier.sink.connection.cursor()
    dialect = applier.sink.dialect
    for table in applier.plan.tables:
        parts = [(table.target_table, target_name(table, dialect), table.columns)]
        if table.log_table:
            parts.append((table.log_table, ".".join(f'"{p}"' for p in table.log_parts),
                          table.log_columns))
        for label, name, columns in parts:
            names = [c.target_column for c in columns if c.target_column != "_SYNCED_AT"]
            cursor.execute(f"SELECT {', '.join(chr(34) + n + chr(34) for n in names)} "
                           f"FROM {name}")
            out[label] = sorted(cursor.fetchall(), key=repr)
    return out


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_through_the_external_stage_equals_the_drivers(fakesnow_server, tmp_path,
                                                                  mode):
    staged, driver, staged_queries = _staged_and_driver(fakesnow_server, tmp_path, MODES[mode])

    rows = _every_row(staged)
    assert rows == _every_row(driver)
    assert all(rows.values()) and sum(map(len, rows.values())) >= 4
    if mode == "filters":  # "two again" fails it; so do b's changes (never matched: dropped)
        assert [row[0] for row in rows["ITEMS"]] == [1, 30]
        assert sorted(row[1] for row in rows["PEOPLE"]) == ["a", "a2"]
    if mode == "computed columns and the filter language":
        # every change of rows the filter matched; the max key's and "back"'s are dropped
        assert sorted(row[0] for row in rows["ITEMS"]) == [1, 1, 2, 2, 3, 3, 30]
        awkward = next(row for row in rows["ITEMS"] if row[0] == 1)
        assert awkward[14:20] == ("it'-1", 5e-301, 1001, 354285, "yes",
                                  Decimal("-1234567890123456789012345678.01"))
        assert any("_COMPUTED_" in q.upper() and "SUBSTR(" in q for q in staged_queries)
    if mode == "masks of numbers and dates":
        awkward = [row for row in rows["ITEMS"] if row[0] == 1 and row[13] is not None]
        assert awkward and all(row[2] is None and row[9] is None and len(row[13]) == 64
                               and row[12] == "c4ca4238a0b923820dcc509a6f75849b"  # md5('1')
                               for row in awkward)
    if mode == "masks":  # masked, not copied: the salted SHA-256 of each nick, in hex
        assert all(len(row[1]) == 64 and row[1] not in ("a", "a2", "b") for row in rows["PEOPLE"])
    assert not any(q.lstrip().upper().startswith("PUT") for q in staged_queries)
    assert any(q.startswith("COPY INTO") and f"FROM @{STAGE}" in q for q in staged_queries)


def test_each_plans_statement_is_rendered_once_and_anew_after_a_re_plan():
    """Every batch of a table asks for its staging statement (``external_staging``): rendered
    at the first, the same object for the next; a plan or dialect built anew (a re-plan)
    renders again, to the same text and parameters where nothing changed, and a re-plan's
    change shows in its statement while the old plan keeps its own."""
    account = SimpleNamespace(account="unused")  # nothing here connects
    for mode, tables in [("merge", None), *MODES.items()]:
        pipeline = _pipeline(account, "X", "s3://landing/x", stage=STAGE, tables=tables)
        plan, dialect = build_plan(pipeline, CATALOG), pipeline_dialect(pipeline)
        for table in plan.tables:
            first = external_staging(table, dialect)
            assert first is not None, mode
            assert external_staging(table, dialect) is first, mode
            replanned = build_plan(pipeline, CATALOG).table(table.target_table)
            again = external_staging(replanned, pipeline_dialect(pipeline))
            assert again is not first and again == first, mode

    filtered = (TablePipeline(source_database="shop", source_table="people",
                              filter="nick <> 'zz'"),)
    pipeline = _pipeline(account, "X", "s3://landing/x", stage=STAGE, tables=filtered)
    dialect = pipeline_dialect(pipeline)
    people = build_plan(pipeline, CATALOG).tables[0]
    before = external_staging(people, dialect)
    after = external_staging(dataclasses.replace(people, filter="nick <> 'yy'"), dialect)
    assert before is not None and after is not None
    assert "<> 'zz'" in before.sql and "<> 'yy'" in after.sql and "'zz'" not in after.sql
    assert external_staging(people, dialect) is before
    assert external_staging(people, pipeline_dialect(_pipeline(
        account, "X", "s3://landing/x", stage=None, tables=filtered))) is None
