"""Change events survive the trip through the data source's rows exactly (encode -> decode)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

pytest.importorskip("pyspark")

from replicator.engine.datasource import (
    CHANGE_COLUMNS,
    arrow_batches,
    change_row,
    reader_options,
    source_from_options,
)
from replicator.engine.metrics import BatchReport, TableReport, format_json, format_text
from replicator.engine.transform import event_from_row
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import MySQLSource

AWKWARD = {
    "id": 18_446_744_073_709_551_615,
    "s": "quote ' \" back \\ newline \n emoji 🐬",
    "none_text": "None",
    "null": None,
    "amount": Decimal("-12345678901234567890123456.0123456789"),
    "at": dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    "at_utc": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    "day": dt.date(1999, 12, 31),
    "time": dt.timedelta(hours=-838, minutes=-59, seconds=-59),
    "raw": b"\x00\xff'",
    "ratio": -0.0,
}


def test_change_row_round_trip_is_exact():
    event = ChangeEvent(
        table="shop.t", op="u", position=BinlogPosition("mysql-bin.000012", 777), row_index=3,
        ts_ms=1_700_000_000_123, before={**AWKWARD, "s": "old"}, after=AWKWARD,
        gtid="0-1-42", transaction_id="0-1-42",
        end_position=BinlogPosition("mysql-bin.000012", 999),
    )
    row = change_row(event, ["id"])
    assert set(row) == {name for name, _ in CHANGE_COLUMNS}
    assert row["file_seq"] == 12 and json.loads(row["key"]) == {"id": AWKWARD["id"]}
    back = event_from_row(row)
    assert back == event
    assert type(back.after["amount"]) is Decimal and str(back.after["ratio"]) == "-0.0"
    (batch,) = list(arrow_batches(iter([row])))
    assert batch.num_rows == 1 and batch.schema.names == [name for name, _ in CHANGE_COLUMNS]


def test_reader_options_keep_the_password_out_of_the_source_json():
    source = MySQLSource(host="db", port=3307, user="u", password="s3cret", server_id=9)
    options = reader_options(source, tables=["a.b"], keys={"a.b": ["id"]}, server_id=9,
                             start=BinlogPosition("mysql-bin.000001", 4), max_rows=10)
    assert "s3cret" not in options["source"] and options["password"] == "s3cret"
    assert all(key == key.lower() for key in options)  # Spark lower-cases option keys
    assert source_from_options(options) == source


def test_metric_lines():
    report = BatchReport("stream", 4, {"file": "mysql-bin.000002", "pos": 10},
                         [TableReport("shop.t", changes=5, rows=3, seconds_merge=0.25)], 1.5)
    text = format_text(report)
    assert "batch=4 position=mysql-bin.000002:10 changes=5 rows=3" in text
    assert "table=shop.t" in text and "merge_s=0.250" in text
    assert json.loads(format_json(report))["tables"][0]["rows"] == 3
