"""The compiled decoder's switch and its Arrow buffers (the rows themselves are checked against
the Python reference on a real server: tests/integration/test_fastdecode_*)."""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal

import pyarrow as pa
import pytest

import replicator.source.fast.native as native
from replicator.errors import ConfigError

VALUES = [
    (pa.int8(), [-128, None, 127]),
    (pa.uint16(), [0, 65535, None]),
    (pa.int32(), [-(2**31), 2**31 - 1]),
    (pa.uint64(), [2**64 - 1, 0, None]),  # BIGINT UNSIGNED max
    (pa.int64(), [-(2**63), None]),
    (pa.float64(), [1.1, -2.5e-300, None]),
    (pa.decimal128(38, 10), [Decimal("-1234567890123456789012345678.1234567890"),
                             Decimal("5.5"), Decimal("0E-10"), Decimal("-0.0000000001"), None]),
    (pa.decimal128(12, 2), [Decimal("5"), 7, None]),
    (pa.decimal256(65, 30), [Decimal("-12345678901234567890123456789012345.1234567890123456789"
                                     "01234567890"), None]),
    (pa.date32(), [dt.date(1, 1, 1), dt.date(9999, 12, 31), None, dt.date(1970, 1, 1)]),
    (pa.timestamp("us"), [dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                          None]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(2038, 1, 19, 3, 14, 7, 1, tzinfo=dt.UTC), None]),
    (pa.string(), ["", "ü😀" * 100, None, "x" * 300]),
    (pa.binary(), [b"\x00\xff", b"", None, "text"]),
]


@pytest.mark.parametrize(("kind", "values"), VALUES, ids=[str(k) for k, _ in VALUES])
def test_python_values_fill_the_buffers_as_pa_array_would(kind, values):
    columns = native.NativeColumns([kind])
    for _round in range(2):  # the buffers are emptied and refilled chunk after chunk
        for value in values:
            columns.appends[0](value)
        (array,) = columns.arrays(lambda items, kind_, _index: pa.array(items, type=kind_))
        array.validate(full=True)
        assert array.equals(pa.array(values, type=kind))


@pytest.mark.parametrize(("kind", "value"), [
    (pa.int8(), 128), (pa.uint8(), -1), (pa.uint64(), 2**64),
    (pa.decimal128(5, 2), Decimal("1000.00")), (pa.decimal128(5, 2), Decimal("1.001")),
    (pa.string(), b"\xff"), (pa.string(), 5),
])
def test_a_value_that_does_not_fit_is_refused_not_truncated(kind, value):
    columns = native.NativeColumns([kind])
    with pytest.raises((TypeError, ValueError, OverflowError)):
        columns.appends[0](value)
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError)):
        pa.array([value], type=kind)  # the reference's conversion refuses it too


def test_the_switch_picks_the_reference_or_the_compiled_decoder(monkeypatch):
    monkeypatch.setenv("REPLICATOR_DECODER", "python")
    assert native.enabled() is False
    for wanted in ("compiled", "auto", ""):
        monkeypatch.setenv("REPLICATOR_DECODER", wanted)
        assert native.enabled() is True
    monkeypatch.setenv("REPLICATOR_DECODER", "fast")
    with pytest.raises(ConfigError, match="REPLICATOR_DECODER='fast'") as caught:
        native.enabled()
    assert "compiled or python" in caught.value.hint


def test_without_the_extension_auto_runs_the_reference_and_compiled_is_an_error(
        monkeypatch, caplog):
    monkeypatch.setattr(native, "compiled", None)
    monkeypatch.setattr(native, "_announced", [])
    monkeypatch.setenv("REPLICATOR_DECODER", "auto")
    with caplog.at_level(logging.DEBUG, logger=native.__name__):
        assert native.enabled() is False
        assert native.enabled() is False
    assert [r.getMessage() for r in caplog.records].count(
        "the compiled decoder (replicator.source.fast.compiled) is not built: decoding with "
        "the Python reference decoder") == 1  # once, not per read
    monkeypatch.setenv("REPLICATOR_DECODER", "compiled")
    with pytest.raises(ConfigError, match="not built") as caught:
        native.enabled()
    assert "pip install -e ." in caught.value.hint
