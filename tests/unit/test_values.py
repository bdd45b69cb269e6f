"""Row values survive the landing zone exactly (Arrow typed by source_arrow_type -> Parquet ->
back), including the awkward ones: what the JSON image encoding used to guarantee."""

import datetime as dt
import io
import math
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given
from hypothesis import strategies as st

from replicator.model.catalog import MySQLType
from replicator.source.arrow_types import source_arrow_type

UTC = dt.UTC

AWKWARD = {  # column -> (MySQL type, value as the decoders give it)
    "null": ("varchar(5)", None),
    "none_string": ("varchar(5)", "None"),
    "quotes": ("text", "it's \"quoted\" \\ back\\slash\nnew line\ttab"),
    "emoji": ("varchar(20)", "héllo 🚀 𝄞"),
    "ubigint_max": ("bigint unsigned", 2**64 - 1),
    "bigint_min": ("bigint", -(2**63)),
    "dec": ("decimal(38,10)", Decimal("1234567890123456789012345678.1234567890")),
    "dec65": ("decimal(65,30)", Decimal("-" + "9" * 35 + "." + "9" * 30)),
    "dt6": ("datetime(6)", dt.datetime(2024, 2, 29, 23, 59, 59, 999999)),
    "ts_utc": ("timestamp(6)", dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
    "date": ("date", dt.date(1000, 1, 1)),
    "time_neg": ("time(6)", "-838:59:59.000000"),
    "blob": ("blob", b"\x00\xff'\\\n"),
    "empty_blob": ("varbinary(3)", b""),
    "float": ("double", 0.1),
    "neg_zero": ("double", -0.0),
    "bit64": ("bit(64)", 2**64 - 1),
    "json_text": ("json", '{"a": [1, "two", null]}'),
}


def _round_trip(columns: dict[str, tuple[str, list]]) -> dict[str, list]:
    table = pa.table({name: pa.array(values, type=source_arrow_type(MySQLType.parse(kind)))
                      for name, (kind, values) in columns.items()})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    buffer.seek(0)
    return pq.read_table(buffer).to_pydict()


def test_awkward_values_round_trip_with_types():
    back = _round_trip({name: (kind, [value]) for name, (kind, value) in AWKWARD.items()})
    for name, (_, value) in AWKWARD.items():
        (got,) = back[name]
        assert got == value, name
        assert type(got) is type(value) or isinstance(got, type(value)), name
    assert str(back["dec"][0]) == str(AWKWARD["dec"][1])  # every digit, same exponent
    assert back["ts_utc"][0].utcoffset() == dt.timedelta(0)
    assert math.copysign(1, back["neg_zero"][0]) == -1
    assert back["null"] == [None] and back["none_string"] == ["None"]  # NULL is not 'None'


@given(st.lists(st.integers(min_value=0, max_value=2**64 - 1)),
       st.lists(st.decimals(min_value=-(10**27), max_value=10**27, places=10,
                            allow_nan=False, allow_infinity=False)),
       st.lists(st.text()), st.lists(st.binary()),
       st.lists(st.datetimes(min_value=dt.datetime(1000, 1, 1))),
       st.lists(st.floats(allow_nan=False)))
def test_any_values_round_trip(ubigints, decimals, texts, blobs, datetimes, floats):
    columns = {"u": ("bigint unsigned", ubigints), "d": ("decimal(38,10)", decimals),
               "t": ("longtext", texts), "b": ("longblob", blobs),
               "dt": ("datetime(6)", datetimes), "f": ("double", floats)}
    width = max(len(v) for _, v in columns.values())
    padded = {n: (k, v + [None] * (width - len(v))) for n, (k, v) in columns.items()}
    back = _round_trip(padded)
    for name, (_, values) in padded.items():
        assert back[name] == values, name
        assert [str(v) for v in back[name]] == [str(v) for v in values] or name == "f", name
