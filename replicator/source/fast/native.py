"""The compiled row decoder (``compiled.pyx``, built by ``pip install``), when it is there.

``read_change_batches`` asks ``enabled()`` once per read: with the extension, each table's
image columns are Arrow buffers filled in C (``NativeColumns``) and each Table_map's rows are
read by a ``ShapeDecoder`` (``shape_decoder``) instead of the generated Python codec; the
Python codec (``codec.compile_columnar``) stays the reference the differential corpus and the
property tests check the compiled one against, and what runs when the extension is absent
(logged once at debug) or ``REPLICATOR_DECODER=python`` asks for it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from replicator.errors import ConfigError
from replicator.source.fast.codec import native_cells
from replicator.source.values import ValueStats, ZeroDates

if TYPE_CHECKING:
    import pyarrow as pa

try:
    import replicator.source.fast.compiled as compiled
except ImportError:  # not built (a source tree without `pip install -e .`)
    compiled = None

_log = logging.getLogger(__name__)
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MICROSECOND = dt.timedelta(microseconds=1)
_announced: list[bool] = []

# Which wire kinds of ``codec.native_cells`` write which column storage (``_storage``).
_WIRE_WRITES = {"int": ("int", "uint"), "year": ("int",), "double": ("float",),
                "decimal": ("decimal128",), "date": ("date",), "datetime": ("timestamp",),
                "timestamp": ("timestamp",), "enum": ("string",), "bit": ("uint",),
                "utf8": ("string",), "bytes": ("binary",)}


def enabled() -> bool:
    """Whether this read uses the compiled decoder: REPLICATOR_DECODER=python never,
    =compiled always (an error if it is not built), unset or auto when it is built."""
    wanted = os.environ.get("REPLICATOR_DECODER", "auto").strip().lower() or "auto"
    if wanted not in ("auto", "python", "compiled"):
        raise ConfigError(f"REPLICATOR_DECODER={wanted!r} is not a decoder",
                          hint="use auto (the default), compiled or python")
    if wanted == "python":
        return False
    if compiled is None:
        if wanted == "compiled":
            raise ConfigError(
                "REPLICATOR_DECODER=compiled, but the compiled decoder is not built",
                hint="reinstall replicator with a C compiler and Python's headers present "
                "(pip install -e .), build it in a source tree (scripts/build-decoder), or "
                "unset REPLICATOR_DECODER")
        if not _announced:
            _announced.append(True)
            _log.debug("the compiled decoder (replicator.source.fast.compiled) is not built: "
                       "decoding with the Python reference decoder")
        return False
    return True


def _storage(kind: pa.DataType) -> tuple[str, str, int, int, int, bool]:
    """(storage, logical kind, bytes per value, precision, scale, tz) of an Arrow type."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_integer(kind):
        return ("fixed", "uint" if t.is_unsigned_integer(kind) else "int",
                kind.bit_width // 8, 0, 0, False)
    if t.is_float64(kind):
        return ("fixed", "float", 8, 0, 0, False)
    if t.is_decimal128(kind):
        return ("fixed", "decimal128", 16, kind.precision, kind.scale, False)
    if t.is_date32(kind):
        return ("fixed", "date", 4, 0, 0, False)
    if t.is_timestamp(kind) and kind.unit == "us":
        return ("fixed", "timestamp", 8, 0, 0, kind.tz is not None)
    if kind == pa.string():
        return ("var", "string", 0, 0, 0, False)
    if kind == pa.binary():
        return ("var", "binary", 0, 0, 0, False)
    return ("python", "python", 0, 0, 0, False)  # decimal256 ...: pa.array at the chunk


def _unscaled(value: Any, precision: int, scale: int) -> int:
    """A Decimal (or int) as decimal128(precision, scale)'s integer, as ``pa.array`` would
    store it: exact, or a ValueError."""
    sign, digits, exponent = Decimal(value).as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"{value!r} is not a finite decimal")
    number = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        number *= 10**shift
    elif number % 10**-shift:
        raise ValueError(f"{value!r} has more than {scale} decimal places")
    else:
        number //= 10**-shift
    if number >= 10**precision:
        raise ValueError(f"{value!r} has more than {precision} digits")
    return -number if sign else number


def _micros(value: dt.datetime) -> int:
    return (value - (_EPOCH if value.tzinfo is None else _EPOCH_UTC)) // _MICROSECOND


class NativeColumns:
    """One table's image columns as Arrow buffers (the compiled ``Columns``)."""

    def __init__(self, types: Sequence[pa.DataType]) -> None:
        assert compiled is not None
        self.types = list(types)
        self.storage = [_storage(kind) for kind in self.types]
        self.buffers = compiled.Columns(
            [(compiled.STORAGE[s], compiled.LOGICAL[logical], width, precision, scale, tz)
             for s, logical, width, precision, scale, tz in self.storage],
            _unscaled, _micros)
        self.appends = self.buffers.appenders()  # any Python value (library rows)

    @property
    def largest(self) -> int:
        """The bytes of the largest string column (``columnar.SPILL_BYTES``)."""
        return int(self.buffers.largest)

    def arrays(self, to_array: Callable[[list[Any], pa.DataType, int], pa.Array]
               ) -> list[pa.Array]:
        """The columns since the last call, emptied; ``to_array(values, type, column)`` for
        those kept as Python values."""
        import pyarrow as pa

        out = []
        for index, (kind, (rows, nulls, validity, data, offsets, values)) in enumerate(
                zip(self.types, self.buffers.take(), strict=True)):
            if self.storage[index][0] == "python":
                out.append(to_array(values, kind, index))
                continue
            mask = pa.py_buffer(validity) if nulls else None
            buffers = [mask, pa.py_buffer(data)] if offsets is None else \
                [mask, pa.py_buffer(offsets), pa.py_buffer(data)]
            out.append(pa.Array.from_buffers(kind, rows, buffers, null_count=nulls))
        return out


def shape_decoder(columns: Sequence[Any], table: str, types: Sequence[pa.DataType],
                  key_indexes: Sequence[int], before_image: Callable[..., tuple[Any, ...]]
                  ) -> Any | None:
    """The compiled decoder of one Table_map shape (inserts / updates / deletes with the
    reference codec's signature), or None when the library decodes its rows.
    ``before_image``: the reference codec's, for key moves."""
    assert compiled is not None
    plan = native_cells(columns, table)
    if isinstance(plan, str):
        return None
    for (kind, *_), arrow_type in zip(plan, types, strict=True):
        # A wire kind writes its C value into one storage; the type map and the plan are
        # kept in step by the tests, and a mismatch is a bug, never a value.
        if not kind.startswith("object") and _storage(arrow_type)[1] not in _WIRE_WRITES[kind]:
            raise AssertionError(f"{table}: {kind} cannot fill {arrow_type}")
    wire = [(compiled.WIRE[kind], width, a, b, param) for kind, width, a, b, param in plan]
    names = [column.name for column in columns]
    return compiled.ShapeDecoder(table, names, wire, list(key_indexes), before_image,
                                ZeroDates("null", ValueStats()))


__all__ = ["NativeColumns", "enabled", "shape_decoder"]
