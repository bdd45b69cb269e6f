"""The fast path's cell decoders and generated row decoders against reference encoders of
MySQL's binary formats (no server; the integration tests compare with the library)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import struct
from decimal import Context, Decimal, localcontext
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.source.fast import cells
from replicator.source.fast.codec import (
    DATETIME2,
    JSON,
    LONG,
    NEWDECIMAL,
    VARCHAR,
    RowCodec,
    compile_codec,
)
from replicator.source.fast.reader import _change_event
from replicator.source.values import ZeroDates


def encode_decimal(value: Decimal, precision: int, scale: int) -> bytes:
    """MySQL's decimal2bin (strings/decimal.cc), written from the format description."""
    negative = value < 0
    with localcontext(Context(prec=100)):
        digits = f"{abs(value):.{scale}f}"
    whole, _, fraction = digits.partition(".")
    whole = whole.lstrip("0").rjust(precision - scale, "0")
    intg0x = (precision - scale) % 9
    groups: list[tuple[str, int]] = []
    if intg0x:
        groups.append((whole[:intg0x], cells.DIG2BYTES[intg0x]))
    groups += [(whole[k:k + 9], 4) for k in range(intg0x, len(whole), 9)]
    groups += [(fraction[k:k + 9], 4) for k in range(0, scale - scale % 9, 9)]
    if scale % 9:
        groups.append((fraction[scale - scale % 9:], cells.DIG2BYTES[scale % 9]))
    data = bytearray(b"".join(int(text or "0").to_bytes(size, "big") for text, size in groups))
    if negative:
        data = bytearray(byte ^ 0xFF for byte in data)
    data[0] ^= 0x80
    return bytes(data)


@st.composite
def decimals(draw):
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(precision, 30)))
    unscaled = draw(st.integers(-(10**precision - 1), 10**precision - 1))
    return Decimal(unscaled).scaleb(-scale, Context(prec=100)), precision, scale


@given(decimals())
def test_decimal_reader_keeps_every_digit_and_the_scale(case):
    value, precision, scale = case
    data = encode_decimal(value, precision, scale)
    assert len(data) == cells.decimal_size(precision, scale)
    decoded = cells.decimal_reader(precision, scale)(data)
    assert decoded == value
    assert decoded.as_tuple().exponent == -scale  # Decimal('5.00'), as the library gives


def encode_datetime2(value: dt.datetime, fsp: int) -> bytes:
    year_month = value.year * 13 + value.month
    packed = (1 << 39) | year_month << 22 | value.day << 17 | value.hour << 12 | \
        value.minute << 6 | value.second
    frac_bytes = cells.FSP_BYTES[fsp]
    fraction = value.microsecond // 10 ** (6 - fsp)
    if fsp % 2:
        fraction *= 10
    return packed.to_bytes(5, "big") + fraction.to_bytes(frac_bytes, "big") if frac_bytes \
        else packed.to_bytes(5, "big")


@given(st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31)), st.integers(0, 6))
def test_datetime2_reader(value, fsp):
    value = value.replace(microsecond=value.microsecond // 10 ** (6 - fsp) * 10 ** (6 - fsp))
    read = cells.datetime2_reader(fsp, "d.t", "c")
    assert read(encode_datetime2(value, fsp), ZeroDates("error")) == value


@given(st.integers(1, 2**31 - 1), st.integers(0, 999999), st.integers(0, 6))
def test_timestamp2_reader_is_aware_utc(seconds, micros, fsp):
    micros = micros // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    fraction = micros // 10 ** (6 - fsp) * (10 if fsp % 2 else 1)
    data = seconds.to_bytes(4, "big") + fraction.to_bytes(cells.FSP_BYTES[fsp], "big")
    value = cells.timestamp2_reader(fsp, "d.t", "c")(data, ZeroDates("error"))
    assert value == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
        seconds=seconds, microseconds=micros)
    assert value.tzinfo is dt.UTC


def test_zero_dates_follow_the_policy():
    zero = ZeroDates("null")
    assert cells.datetime2_reader(0, "d.t", "c")(encode_datetime2_zero(), zero) is None
    assert cells.timestamp2_reader(3, "d.t", "c")(bytes(6), zero) is None
    assert cells.date_reader("d.t", "c")(0, zero) is None
    assert zero.stats.zero_dates == 3
    with pytest.raises(SourceError, match=r"d\.t\.c holds a zero date"):
        cells.date_reader("d.t", "c")(2024 << 9, ZeroDates("error"))  # 2024-00-00


def encode_datetime2_zero() -> bytes:
    return (1 << 39).to_bytes(5, "big")


def test_set_reader_joins_in_definition_order():
    read = cells.set_reader(("a", "b", "c"))
    assert read(0b101) == "a,c" and read(0) == "" and read(0b111) == "a,b,c"


def column(kind, name, **extra):
    defaults = {"unsigned": False, "character_set_name": None, "enum_values": None,
                "set_values": None}
    return SimpleNamespace(type=kind, name=name, **{**defaults, **extra})


def test_generated_decoder_reads_rows_with_and_without_nulls():
    columns = [
        column(LONG, "id"),
        column(VARCHAR, "note", max_length=300, character_set_name="utf8mb4"),
        column(NEWDECIMAL, "amount", precision=12, decimals=2),
        column(DATETIME2, "at", fsp=6),
    ]
    codec = compile_codec(columns, "shop.orders")
    assert isinstance(codec, RowCodec)
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    text = "Zürich 🚀".encode()
    full = (b"\x00" + struct.pack("<i", -7) + struct.pack("<H", len(text)) + text
            + encode_decimal(Decimal("-12.50"), 12, 2) + encode_datetime2(moment, 6))
    nulls = b"\x0a" + struct.pack("<i", 8) + encode_decimal(Decimal("1.00"), 12, 2)
    out: list = []
    end = codec.inserts(full + nulls, 0, len(full + nulls), out, ZeroDates("null"))
    assert end == len(full + nulls)
    assert out == [
        ("shop.orders", "c", None, {"id": -7, "note": "Zürich 🚀", "amount": Decimal("-12.50"),
                                    "at": moment}),
        ("shop.orders", "c", None, {"id": 8, "note": None, "amount": Decimal("1.00"),
                                    "at": None}),
    ]
    out.clear()
    codec.updates(full + nulls, 0, len(full + nulls), out, ZeroDates("null"))
    assert out[0][1] == "u" and out[0][2]["id"] == -7 and out[0][3]["id"] == 8


def test_unhandled_types_and_missing_names_fall_back_with_a_reason():
    assert "JSON" in compile_codec([column(JSON, "doc", length_size=4)], "d.t")
    assert "binlog_row_metadata" in compile_codec([column(LONG, None)], "d.t")


def test_fast_change_event_equals_the_constructed_one():
    position = BinlogPosition("mysql-bin.000001", 4)
    fields = {"table": "d.t", "op": "u", "position": position, "row_index": 3, "ts_ms": 5,
              "before": {"a": 1}, "after": {"a": 2}, "gtid": "0-1-2", "transaction_id": "0-1-2",
              "end_position": BinlogPosition("mysql-bin.000001", 99)}
    fast = _change_event(dict(fields))
    assert fast == ChangeEvent(**fields) and fast.order == (1, 4, 3)
    # _change_event skips __init__: it is only right while ChangeEvent has nothing else to run.
    assert {f.name for f in dataclasses.fields(ChangeEvent)} == set(fields)
    assert not hasattr(ChangeEvent, "__post_init__") and "__slots__" not in vars(ChangeEvent)
