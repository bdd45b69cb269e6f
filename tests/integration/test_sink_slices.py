"""A big batch applied in slices from its landed files (``BatchApplier.apply_files``) through
the real sinks (DuckDB and fakesnow): the same target as applying it whole, in every mode; a
replayed batch is skipped before any file is read; a failure between slices leaves nothing
applied.

The pipeline is ``pipelines/modes.yaml`` (merge + log table, changelog, scd2, soft deletes).
Slices of 3 changes make every key's history cross slices (insert in one, update or key
change or delete in the next), which is what the MERGE's dedup over ``STAGE_SEQ`` must get
right.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.engine.apply import applier as applier_module
from replicator.engine.apply.applier import BatchApplier
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import DuckDBTarget, SnowflakeTarget, TargetConfig
from replicator.plan import DUCKDB, SNOWFLAKE, build_plan, offline_catalog
from replicator.plan.statements.bookkeeping import state_name
from replicator.plan.statements.names import log_name, target_name
from replicator.sink import open_sink
from tests.fixtures.landed import land_events

ROOT = Path(__file__).resolve().parents[2]
SLICE = 3


@pytest.fixture(params=["duckdb", "snowflake"])
def applier(request, tmp_path, monkeypatch):
    monkeypatch.setattr(applier_module, "SLICE_ROWS", SLICE)
    kind = request.param
    patch = None
    if kind == "snowflake":
        fakesnow = pytest.importorskip("fakesnow")
        patch = fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True)
        patch.__enter__()
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    warehouse = (
        DuckDBTarget(path=":memory:", schema="main") if kind == "duckdb"
        else SnowflakeTarget(database="ANALYTICS", schema="RAW", account="fake", user="u",
                             password="p")
    )
    pipeline = dataclasses.replace(pipeline, target=TargetConfig(warehouse=warehouse))
    plan = build_plan(pipeline, offline_catalog(pipeline))
    sink = open_sink(pipeline, plan)
    sink.prepare()
    applier = BatchApplier(pipeline, plan, sink, CheckpointDir(tmp_path / "checkpoint"))
    applier.dialect = DUCKDB if kind == "duckdb" else SNOWFLAKE
    yield applier
    sink.close()
    if patch is not None:
        patch.__exit__(None, None, None)


def _image(table: str, key: int, rng: random.Random) -> dict:
    n = rng.randint(1, 5)
    if table == "shop.orders":
        return {"id": key, "customer_id": n, "status": rng.choice(["new", "paid", "it's"]),
                "amount": None if n == 5 else n * 100}
    if table == "shop.order_events":
        return {"id": key, "order_id": n, "note": f"note {n} 😀", "payload": f'{{"n": {n}}}'}
    if table == "shop.customers":
        return {"id": key, "name": f"c{key}", "email": f"{n}@x", "tier": rng.choice("ab"),
                "city": rng.choice(["Bern", "Zürich"])}
    return {"sku": f"sku-{key}", "title": f"t{n}", "price": n}


def _history(table: str, seed: int, changes: int = 40) -> list[ChangeEvent]:
    """Seeded inserts, updates (some changing the key, for merged tables) and deletes over a
    few keys, in transactions of 1-4 changes at increasing positions."""
    rng = random.Random(seed)
    rows: dict[int, dict] = {}
    events: list[ChangeEvent] = []
    pos = 4
    while len(events) < changes:
        pos += 100
        for index in range(rng.randint(1, 4)):
            key = rng.randint(1, 6)
            before = rows.pop(key, None)
            new_key = key
            if before is None:
                op, after = "c", _image(table, key, rng)
            elif rng.random() < 0.25:
                op, after = "d", None
            else:
                free = [k for k in range(1, 7) if k not in rows and k != key]
                if table in ("shop.orders", "shop.products") and free and rng.random() < 0.3:
                    new_key = rng.choice(free)  # an update that changes the primary key
                op, after = "u", _image(table, new_key, rng)
            if after is not None:
                rows[new_key] = after
            events.append(ChangeEvent(
                table=table, op=op, position=BinlogPosition("mysql-bin.000001", pos),
                row_index=index, ts_ms=1_000 * pos, before=before, after=after,
                transaction_id=f"0-1-{pos}",
                end_position=BinlogPosition("mysql-bin.000001", pos + 99)))
    return events


def _dump(applier) -> dict[str, list[tuple]]:
    """Every target and log table, sorted (the state table apart)."""
    out = {}
    cursor = applier.sink.connection.cursor()
    try:
        for table in applier.plan.tables:
            names = [target_name(table, applier.dialect)]
            if table.log_table:
                names.append(log_name(table, applier.dialect))
            for name in names:
                cursor.execute(f"SELECT * FROM {name}")
                # _SYNCED_AT is the apply's wall clock: the one column the two runs differ in.
                keep = [i for i, d in enumerate(cursor.description)
                        if d[0].upper() != "_SYNCED_AT"]
                out[name] = sorted(tuple(repr(row[i]) for i in keep) for row in cursor.fetchall())
    finally:
        cursor.close()
    return out


def _clear(applier) -> None:
    cursor = applier.sink.connection.cursor()
    try:
        for name in _dump(applier):
            cursor.execute(f"DELETE FROM {name}")
        cursor.execute(f"DELETE FROM {state_name(applier.plan.tables[0], applier.dialect)}")
        if applier.dialect is SNOWFLAKE:
            applier.sink.connection.commit()
    finally:
        cursor.close()


def _files(applier, events, batch_id):
    """The batch's landed files of one table (what its decode task wrote)."""
    return land_events(applier, events, directory=f"batch-{batch_id}-{events[0].table}")


def test_slices_leave_the_same_target_as_the_whole_batch_in_every_mode(applier, monkeypatch):
    batches = [{t.source_name: _history(t.source_name, seed * 10 + i)
                for i, t in enumerate(applier.plan.tables)} for seed in (1, 2)]
    # The same files applied whole (one slice) ... The reference is the change batch, not the
    # ChangeEvents: it carries the key, not the whole row, from before a key update (the
    # delete half of a key update logs the new row's other values; docs/decisions/key-updates-whole-old-row.md).
    monkeypatch.setattr(applier_module, "SLICE_ROWS", 10_000)
    for batch_id, batch in enumerate(batches):
        for table in applier.plan.tables:
            events = batch[table.source_name]
            applier.apply_files(table, _files(applier, events, batch_id), batch_id,
                                {"pos": batch_id})
    whole = _dump(applier)
    monkeypatch.setattr(applier_module, "SLICE_ROWS", SLICE)  # ... and in slices of 3
    assert all(whole.values()), whole  # every table got rows
    _clear(applier)
    by_key = []  # scd2 batches are sliced by key: every change of a key in one slice
    original = applier_module.key_slices

    def key_slices(paths, root, rows, bucket_of):
        by_key.append([piece.num_rows for piece in original(paths, root, rows, bucket_of)])
        yield from original(paths, root, rows, bucket_of)

    monkeypatch.setattr(applier_module, "key_slices", key_slices)
    for batch_id, batch in enumerate(batches):
        for table in applier.plan.tables:
            events = batch[table.source_name]
            report = applier.apply_files(table, _files(applier, events, batch_id + 10),
                                         batch_id, {"pos": batch_id})
            assert (report.changes, report.skipped) == (len(events), False)
    assert _dump(applier) == whole
    assert len(by_key) == 2 and all(len(sizes) > 1 for sizes in by_key), by_key


def test_a_replayed_batch_is_skipped_without_reading_a_file(applier):
    table = applier.plan.table("shop.orders")
    files = _files(applier, _history("shop.orders", 3), 7)
    applier.apply_files(table, files, 7, {"pos": 7})
    before = _dump(applier)
    for row in files:
        Path(row["path"]).unlink()  # reading them now would fail

    report = applier.apply_files(table, files, 7, {"pos": 7})
    assert report.skipped and report.rows == 0
    assert _dump(applier) == before
    assert applier.sink.last_applied(table)["batch_id"] == 7


def test_a_failure_between_slices_leaves_nothing_of_the_batch(applier, monkeypatch):
    table = applier.plan.table("shop.orders")
    applier.apply_files(table, _files(applier, _history("shop.orders", 4), 1), 1, {"pos": 1})
    before = _dump(applier)
    events = _history("shop.orders", 5)
    files = _files(applier, events, 2)
    original = applier_module.file_slices

    def dies_after_two_slices(paths, root, rows):
        pieces = original(paths, root, rows)
        yield next(pieces)
        yield next(pieces)
        raise SourceError("the landing zone went away mid-batch")

    monkeypatch.setattr(applier_module, "file_slices", dies_after_two_slices)
    with pytest.raises(SourceError):
        applier.apply_files(table, files, 2, {"pos": 2})
    assert _dump(applier) == before
    assert applier.sink.last_applied(table)["batch_id"] == 1
    # The batch applies in full when replayed.
    monkeypatch.setattr(applier_module, "file_slices", original)
    report = applier.apply_files(table, files, 2, {"pos": 2})
    assert not report.skipped and report.changes == len(events)
    assert applier.sink.last_applied(table)["batch_id"] == 2
    assert _dump(applier) != before
