"""The landing zone's files (engine.landing): written per table and shape, read back in order
with columns added mid-stream as NULL, in slices, pruned by age; unreadable files are named."""

from __future__ import annotations

import os
import time
from decimal import Decimal

import pyarrow as pa
import pytest

from replicator.engine.job import landing
from replicator.errors import EngineError
from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition
from replicator.source.arrow_types import internal_fields
from replicator.source.fast.columnar import TableChunk

FILE = "mysql-bin.000007"


def chunk(ids: list[int], pos: int, extra: bool = False) -> TableChunk:
    n = len(ids)
    columns = {"id": pa.array(ids, pa.int32()),
               "amount": pa.array([Decimal(i).scaleb(-2) for i in ids], pa.decimal128(12, 2))}
    if extra:
        columns["note"] = pa.array([f"n{i} 😀" for i in ids], pa.string())
    internal = {cb.OP: ["c"] * n, cb.FILE: [FILE] * n, cb.FILE_SEQ: [7] * n, cb.POS: [pos] * n,
                cb.ROW_INDEX: list(range(n)), cb.TS_MS: [pos * 1000] * n, cb.GTID: [None] * n,
                cb.TRANSACTION_ID: [f"{FILE}:{pos}"] * n, cb.TABLE: ["shop.t"] * n}
    for field in internal_fields():
        columns[field.name] = pa.array(internal[field.name], field.type)
    data = pa.table(columns)
    return TableChunk("shop.t", data, BinlogPosition(FILE, pos), BinlogPosition(FILE, pos),
                      BinlogPosition(FILE, pos + 99), "extra" if extra else "plain")


def land(tmp_path, chunks, part=0):
    from pyarrow import fs

    root = str(tmp_path / "landing")
    directory = landing.task_dir(root, 3, BinlogPosition(FILE, 4), BinlogPosition(FILE, 999))
    os.makedirs(directory, exist_ok=True)
    rows, current, opened = [], None, 0
    for item in chunks:
        if current is not None and current.fingerprint != item.fingerprint:
            rows.append(current.close(part, len(rows)))
            current = None
        if current is None:
            current = landing._OpenFile(fs.LocalFileSystem(), f"{directory}/{opened:05d}.parquet",
                                        item.data.schema, item.fingerprint, item.table)
            opened += 1
        current.write(item)
    rows.append(current.close(part, len(rows)))
    return root, rows


def test_task_directory_names_the_epoch_and_range(tmp_path):
    path = landing.task_dir("/x/landing/", 2, BinlogPosition("mysql-bin.000001", 4),
                            BinlogPosition("mysql-bin.000002", 77))
    assert path == "/x/landing/stream/epoch=2/mysql-bin.000001_4-mysql-bin.000002_77"
    assert landing.landing_root(None, tmp_path / "ck") == str((tmp_path / "ck" / "landing").resolve())
    assert landing.landing_root("s3://b/p", tmp_path) == "s3://b/p"


def test_files_read_back_in_order_with_added_columns_null(tmp_path):
    root, manifest = land(tmp_path, [chunk([1, 2], 100), chunk([3], 200), chunk([4, 5], 300, True)])
    assert [(r["rows"], r["pos"], r["last_pos"], r["end_pos"]) for r in manifest] == [
        (3, 100, 200, 299), (2, 300, 300, 399)]
    paths = [r["path"] for r in sorted(manifest, key=landing.file_order)]
    table = landing.read_files(paths, root, sort=False)
    assert table.column("id").to_pylist() == [1, 2, 3, 4, 5]
    assert table.column("note").to_pylist() == [None, None, None, "n4 😀", "n5 😀"]
    assert table.column("amount").to_pylist()[0] == Decimal("0.01")
    slices = list(landing.file_slices(paths, root, 2))
    assert [s.num_rows for s in slices] == [2, 1, 2]  # row groups are never merged across
    assert all(s.schema == table.schema for s in slices)
    batch = landing.manifest_batch(manifest)
    assert batch.schema.names == [name for name, _ in landing.MANIFEST_COLUMNS]


def test_an_unreadable_file_is_named_with_a_hint(tmp_path):
    root, manifest = land(tmp_path, [chunk([1], 100)])
    os.remove(manifest[0]["path"])
    with pytest.raises(EngineError) as raised:
        landing.read_files([manifest[0]["path"]], root, sort=False)
    assert manifest[0]["path"] in raised.value.message and "engine.landing" in raised.value.hint


def test_prune_removes_old_task_directories_only(tmp_path):
    root, manifest = land(tmp_path, [chunk([1], 100)])
    directory = os.path.dirname(manifest[0]["path"])
    assert landing.prune(root, 3_600_000) == 0 and os.path.exists(directory)
    old = time.time() - 7200
    os.utime(directory, (old, old))
    assert landing.prune(root, 3_600_000, keep=[directory]) == 0
    assert landing.prune(root, 3_600_000) == 1 and not os.path.exists(directory)
    assert landing.prune(str(tmp_path / "nothing"), 0) == 0
