"""Value normalisation shared by the binlog and snapshot paths (no server)."""

from __future__ import annotations

import datetime as dt
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.errors import SourceError
from replicator.source.values import (
    ValueStats,
    ZeroDates,
    decode_time2,
    float32,
    json_text,
    parse_time,
    set_text,
)


def encode_time2_fsp6(value: dt.timedelta) -> bytes:
    """MySQL's TIME2 writer at fsp 6 (my_time_packed_to_binary): a signed 48-bit packed value."""
    negative = value < dt.timedelta(0)
    magnitude = -value if negative else value
    total_us = magnitude.days * 86_400_000_000 + magnitude.seconds * 1_000_000 + magnitude.microseconds
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    packed = (((hours << 12) | (minutes << 6) | secs) << 24) + micros
    return ((-packed if negative else packed) + 0x800000000000).to_bytes(6, "big")


@given(st.integers(min_value=-(838 * 3600 + 59 * 60 + 59) * 10**6 - 999_999,
                   max_value=(838 * 3600 + 59 * 60 + 59) * 10**6 + 999_999))
def test_time2_round_trips_at_fsp6(micros):
    value = dt.timedelta(microseconds=micros)
    assert decode_time2(encode_time2_fsp6(value), 6) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-838:59:59.000001", -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=1)),
        ("100:00:00", dt.timedelta(hours=100)),
        ("-00:00:01", -dt.timedelta(seconds=1)),
        ("-01:00:00.5", -dt.timedelta(hours=1, microseconds=500_000)),
        ("00:00:00", dt.timedelta(0)),
    ],
)
def test_parse_time(text, expected):
    assert parse_time(text) == expected


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_float32_is_the_same_float32_and_idempotent(value):
    shortest = float32(value)
    assert struct.pack("<f", shortest) == struct.pack("<f", value)
    assert float32(shortest) == shortest


def test_float32_prints_what_mysql_prints():
    assert float32(1.100000023841858) == 1.1
    assert float32(struct.unpack("<f", struct.pack("<f", -3.40282e38))[0]) == -3.40282e38
    assert float32(-3.4028234663852886e38) == -3.4028235e38  # FLT_MAX


@pytest.mark.parametrize(
    ("data", "fsp", "expected"),
    [  # MySQL TIME2 layout: int part - 1 and a negative fraction for negative times
        (bytes.fromhex("7fefff") + bytes([0xCE]), 2, -dt.timedelta(hours=1, microseconds=500_000)),
        (bytes.fromhex("800000"), 0, dt.timedelta(0)),
    ],
)
def test_time2_short_fractions(data, fsp, expected):
    assert decode_time2(data, fsp) == expected


def test_set_text_in_definition_order_and_empty():
    assert set_text({"c", "a"}, ("a", "b", "c")) == "a,c"
    assert set_text(None, ("a",)) == ""


def test_json_text_from_mysql_binary_json_values():
    assert json_text({b"a": [1, 2.5, b"x"], b"k": None}) == '{"a": [1, 2.5, "x"], "k": null}'
    assert json_text('{"kept":  "as is"}') == '{"kept":  "as is"}'


def test_zero_date_policy():
    stats = ValueStats()
    ZeroDates("null", stats)("db.t", "d", "0000-00-00")
    assert stats.zero_dates == 1
    with pytest.raises(SourceError) as error:
        ZeroDates("error")("db.t", "d", "0000-00-00")
    assert "db.t.d" in error.value.message


def test_float32_over_a_column_is_float32_per_value():
    """Every exponent, both signs, subnormals and the neighbours of each power of two (where
    a loop over %g widths missed the shortest form)."""
    import numpy as np
    import pyarrow as pa

    from replicator.source.values import float32_column

    powers = np.array([np.float32(2.0) ** k for k in range(-149, 128)], dtype=np.float32)
    bits = powers.view(np.uint32)
    rng = np.random.default_rng(30)
    every = np.concatenate([bits, bits + 1, bits - 1, rng.integers(0, 2**32, 20000,
                                                                   dtype=np.uint64)
                            .astype(np.uint32)]).view(np.float32)
    values = [float(v) for v in every[np.isfinite(every)]]
    values += [-v for v in values]
    column = float32_column(pa.array(values, pa.float64())).to_pylist()
    assert column == [float32(v) for v in values]
    assert float32(float(np.float32(3.0e-39))) == 3e-39  # a subnormal's shortest form
