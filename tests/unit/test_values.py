"""Row values survive encode/decode exactly, including the awkward ones."""

import datetime as dt
import math
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from replicator.model.values import decode_image, encode_image

AWKWARD = {
    "null": None,
    "none_string": "None",
    "quotes": "it's \"quoted\" \\ back\\slash\nnew line\ttab",
    "emoji": "héllo 🚀 𝄞",
    "ubigint_max": 2**64 - 1,
    "bigint_min": -(2**63),
    "dec": Decimal("1234567890123456789012345678.1234567890"),
    "dec_exp": Decimal("1E+3"),
    "dec_neg_zero": Decimal("-0.00"),
    "dt6": dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
    "ts_utc": dt.datetime(2024, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
    "date": dt.date(1000, 1, 1),
    "time_neg": -dt.timedelta(hours=838, minutes=59, seconds=59),
    "time_big": dt.timedelta(hours=100, microseconds=5),
    "blob": b"\x00\xff'\\\n",
    "empty_blob": b"",
    "float": 0.1,
    "neg_zero": -0.0,
    "bool": True,
    "json_text": '{"a": [1, "two", null]}',
}


def test_awkward_values_round_trip_with_types():
    decoded = decode_image(encode_image(AWKWARD))
    assert decoded == AWKWARD
    for column, value in AWKWARD.items():
        assert type(decoded[column]) is type(value), column
    assert str(decoded["dec"]) == str(AWKWARD["dec"])  # every digit, same exponent
    assert str(decoded["dec_neg_zero"]) == "-0.00"
    assert math.copysign(1, decoded["neg_zero"]) == -1


def test_null_is_not_the_string_none():
    decoded = decode_image(encode_image({"a": None, "b": "None"}))
    assert decoded["a"] is None
    assert decoded["b"] == "None"


def test_no_image_stays_none():
    assert encode_image(None) is None
    assert decode_image(None) is None


scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.datetimes(),
    st.dates(),
    st.timedeltas(),
)


@given(st.dictionaries(st.text(min_size=1), scalar))
def test_any_image_round_trips(image):
    decoded = decode_image(encode_image(image))
    assert decoded == image
    assert [type(v) for v in decoded.values()] == [type(v) for v in image.values()]
