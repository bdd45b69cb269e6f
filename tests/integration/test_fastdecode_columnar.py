"""The columnar fast reader against the ChangeEvent one: the same rows, values, order and
internal columns, on the differential corpus (every MySQL type MariaDB writes, ALTER
mid-stream, multi-table transactions, a file switch)."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

import replicator.source.fast.columnar as columnar
from replicator.model import change_batch as cb
from replicator.model.changes import ChangeEvent, SchemaChange
from replicator.source.fast.columnar import KeyColumns, TableChunk, read_change_batches
from replicator.source.fast.counters import FastDecodeCounters
from replicator.source.fast.reader import read_changes_fast
from replicator.source.values import parse_time
from tests.fixtures.decoders import decoder  # noqa: F401  (both decoders)

from .test_fastdecode_differential import corpus  # noqa: F401  (the shared fixture)

pytestmark = pytest.mark.mysql

_server_ids = itertools.count(7301)

KEYS = KeyColumns({"fastdecode_corpus.composite": ["a", "b"]})


def expected_rows(events):
    """Per table, the change-batch rows the events stand for (image + internal columns)."""
    out: dict[str, list[dict]] = {}
    for event in events:
        if not isinstance(event, ChangeEvent):
            continue
        image = event.before if event.op == "d" else event.after
        row = dict(image)
        row.update({
            cb.OP: event.op, cb.FILE: event.position.file, cb.FILE_SEQ: event.position.sequence,
            cb.POS: event.position.pos, cb.ROW_INDEX: event.row_index, cb.TS_MS: event.ts_ms,
            cb.GTID: event.gtid, cb.TRANSACTION_ID: event.transaction_id, cb.TABLE: event.table,
        })
        out.setdefault(event.table, []).append((row, event))
    return out


def same(actual, expected) -> bool:
    if isinstance(expected, dt.timedelta):  # TIME travels as MySQL's text
        return isinstance(actual, str) and parse_time(actual) == expected
    if isinstance(expected, dt.datetime) and expected.tzinfo is not None:
        # Arrow gives zoneinfo's UTC, the decoders datetime.UTC: the same instant and offset.
        return actual == expected and actual.utcoffset() == dt.timedelta(0)
    return type(actual) is type(expected) and repr(actual) == repr(expected)


def compare(chunks, events, keys_of):
    by_table = expected_rows(events)
    got: dict[str, list[dict]] = {}
    moved_keys: dict[str, int] = dict.fromkeys(by_table, 0)
    for chunk in chunks:
        assert chunk.data.num_rows > 0
        got.setdefault(chunk.table, []).extend(chunk.data.to_pylist())
    assert sorted(got) == sorted(by_table)
    for table, rows in by_table.items():
        assert len(got[table]) == len(rows), table
        for actual, (expected, event) in zip(got[table], rows, strict=True):
            for name, value in expected.items():
                assert same(actual[name], value), (table, name, actual[name], value)
            image = [name for name in expected if not cb.is_internal(name)]
            assert set(actual) - set(expected) == {cb.before_column(c) for c in image}
            changed = event.op == "u" and any(
                event.before[k] != event.after[k] for k in keys_of(table))
            moved_keys[table] += changed
            for name in image:  # the whole old row on a key move, else nothing
                before = actual[cb.before_column(name)]
                assert same(before, event.before[name]) if changed else before is None, \
                    (table, name, before)
    # The corpus moves keys of awkward rows (every number, temporal and text type).
    assert {t.split(".")[1] for t, n in moved_keys.items() if n} >= {
        "numbers", "temporal", "texts", "composite"}


def keys_of(table: str) -> list[str]:
    return ["a", "b"] if table.endswith(".composite") else ["id"]


@pytest.mark.parametrize("chunk_rows", [100_000, 3])
@pytest.mark.usefixtures("decoder")
def test_columns_equal_the_change_events(mysql_source, corpus, chunk_rows):  # noqa: F811
    _, start, end = corpus
    events = list(read_changes_fast(mysql_source, start=start, end=end, tables=None,
                                    server_id=next(_server_ids)))
    counters = FastDecodeCounters()
    items = list(read_change_batches(mysql_source, start=start, end=end, tables=None,
                                     server_id=next(_server_ids), keys=KEYS,
                                     chunk_rows=chunk_rows, counters=counters))
    chunks = [item for item in items if isinstance(item, TableChunk)]
    assert [i for i in items if isinstance(i, SchemaChange)] == \
        [e for e in events if isinstance(e, SchemaChange)]
    compare(chunks, events, keys_of)
    assert counters.rows_library == 0
    assert counters.rows_fast == sum(c.data.num_rows for c in chunks)
    # A shape change (ALTER) starts a new chunk; spilling makes chunks of at most chunk_rows.
    numbers = [c for c in chunks if c.table.endswith(".numbers")]
    assert len({c.fingerprint for c in numbers}) == 3
    shapes = {(c.table, c.fingerprint) for c in chunks}
    if chunk_rows == 3:  # spilled: chunks close once a rows event takes them past 3 rows
        assert len(chunks) > len(shapes) + 10
    else:
        assert len(chunks) == len(shapes)
    for chunk in chunks:
        order = chunk.data.select(list(cb.ORDER_COLUMNS)).to_pylist()
        keys = [tuple(r.values()) for r in order]
        assert keys == sorted(keys)
        assert (chunk.first.sequence, chunk.first.pos) == keys[0][:2]
        assert (chunk.last.sequence, chunk.last.pos) == keys[-1][:2]


@pytest.mark.usefixtures("decoder")
def test_library_fallback_fills_the_same_columns(mysql_source, corpus):  # noqa: F811
    _, start, end = corpus
    events = list(read_changes_fast(mysql_source, start=start, end=end, tables=None,
                                    server_id=next(_server_ids)))
    items = list(read_change_batches(mysql_source, start=start, end=end, tables=None,
                                     server_id=next(_server_ids), keys=KEYS,
                                     force_library=True))
    compare([i for i in items if isinstance(i, TableChunk)], events, keys_of)


def test_compiled_string_buffers_close_the_chunk_before_their_int32_offsets_overflow(
        mysql_source, corpus, monkeypatch):  # noqa: F811
    """The compiled decoder's string columns address 2 GiB: past SPILL_BYTES (1 here) in any
    of them, the chunk closes after the rows event, and the rows are still all there."""
    monkeypatch.setenv("REPLICATOR_DECODER", "compiled")
    monkeypatch.setattr(columnar, "SPILL_BYTES", 1)
    _, start, end = corpus
    events = list(read_changes_fast(mysql_source, start=start, end=end, tables=None,
                                    server_id=next(_server_ids)))
    chunks = [item for item in read_change_batches(mysql_source, start=start, end=end,
                                                   tables=None, server_id=next(_server_ids),
                                                   keys=KEYS) if isinstance(item, TableChunk)]
    compare(chunks, events, keys_of)
    texts = [c for c in chunks if c.table.endswith(".texts")]
    assert len(texts) > len({c.fingerprint for c in texts}) + 2  # unspilled: one per shape
