"""A generated decoder must read a rows event exactly; anything else is a stop that names the
table, the position and the reason (issue 29: never a guess)."""

from __future__ import annotations

import struct

import pytest

from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition
from replicator.source.fast.codec import decode_checked

AT = BinlogPosition("mysql-bin.000007", 4242)


def test_a_decoder_that_reads_the_event_exactly_returns_its_result():
    assert decode_checked(lambda buf, pos, end: (end, 2), "db.t", AT, b"abcdef", 2, 6) == (6, 2)


def test_a_decoder_that_stops_short_of_the_event_end_is_a_stop_naming_table_and_position():
    with pytest.raises(SourceError) as caught:
        decode_checked(lambda buf, pos, end: (end - 2, 1), "db.line_items", AT, b"abcdef", 0, 6)
    message = str(caught.value.message)
    assert "db.line_items" in message and "mysql-bin.000007:4242" in message
    assert "-2 bytes" in message
    assert "mariadb-binlog --start-position=4242" in caught.value.hint


def test_a_decoder_that_overruns_the_buffer_is_a_stop_not_a_traceback():
    def misread(buf, pos, end):
        return struct.unpack_from("<6s", buf, 4)

    with pytest.raises(SourceError) as caught:
        decode_checked(misread, "db.line_items", AT, b"abcdef", 0, 6)
    assert "unpack_from requires a buffer" in caught.value.message
    assert isinstance(caught.value.__cause__, struct.error)
