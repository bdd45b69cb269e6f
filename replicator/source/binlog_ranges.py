"""Transaction boundaries inside a binlog range, found on the driver without decoding rows.

Admission control (``batching.max_rows``) needs "a transaction boundary after about N row
changes from here", and parallel decode needs "split this range into N parts at boundaries".
Decoding the rows to count them would cost as much as the batch itself, so this pages through
``SHOW BINLOG EVENTS IN file FROM pos LIMIT n``: the server lists event headers (type, start,
end) without us decoding anything.

Trade-offs, measured and accepted:

- a boundary is the start of a GTID event (MariaDB ``Gtid``; MySQL ``Gtid`` /
  ``Anonymous_Gtid``, written before every transaction since 5.7), or the head;
- rows are *estimated*: a rows event counts ``max(1, bytes // ROW_BYTES_ESTIMATE)``. Exact for
  single-row statements; a multi-row statement's event (up to ~8 KB of rows) counts by size,
  so a batch can overshoot ``max_rows`` by the rows of one transaction plus the estimate's
  error. A single huge transaction is never split (offsets stay at boundaries);
- the listing costs the server a read of the event headers on the driver, once per
  micro-batch. Listing every event of a 50k-row batch of single-row transactions costs ~2 s,
  so admission control samples the first events and then *skips* the rest with
  ``LIMIT skip, n`` (the server steps over events without sending them, ~20x cheaper),
  estimating events per row from the sample; the exact listing remains for ranges that cross
  a binlog file and for splitting a range into decode partitions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import connect

PAGE_EVENTS = 5_000
SAMPLE_EVENTS = 2_000
ROW_BYTES_ESTIMATE = 100
_ROWS_EVENTS = ("write_rows", "update_rows", "delete_rows")
_BOUNDARY_EVENTS = frozenset({"gtid", "anonymous_gtid", "gtid_log_event"})
# Every binlog event starts with a 19-byte header (v4 format,
# https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html),
# so ``_rows_in`` estimates at most one row change per 19 bytes of a range.
MIN_EVENT_BYTES = 19


@dataclass(frozen=True)
class Boundary:
    position: BinlogPosition  # a transaction boundary
    rows_before: int  # estimated row changes between the scan's start and here


def _rows_in(event_type: str, start: int, end: int) -> int:
    kind = event_type.lower()
    if not kind.startswith(_ROWS_EVENTS):
        return 0
    return max(1, (end - start) // ROW_BYTES_ESTIMATE)


def scan_boundaries(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition
) -> Iterator[Boundary]:
    """Every transaction boundary after ``start`` up to and including ``end``, in order.

    ``start`` must be a boundary (an event start); ``end`` is yielded last, with the estimate
    of all rows in the range.
    """
    rows = 0
    file, pos = start.file, start.pos
    with connect(source) as connection, connection.cursor() as cursor:
        while True:
            # Identifiers cannot be bound; the file name comes from the server itself and is
            # passed as a quoted literal through the driver's escaping.
            cursor.execute(
                f"SHOW BINLOG EVENTS IN {connection.escape(file)} FROM {int(pos)} "
                f"LIMIT {PAGE_EVENTS}"
            )
            events = cursor.fetchall()
            if not events:
                break
            rotated = None
            for log_name, event_pos, event_type, _server, end_log_pos, info in events:
                here = BinlogPosition(str(log_name), int(event_pos))
                if here >= end:
                    yield Boundary(end, rows)
                    return
                kind = str(event_type).lower()
                if kind in _BOUNDARY_EVENTS and here > start:
                    yield Boundary(here, rows)
                rows += _rows_in(kind, int(event_pos), int(end_log_pos))
                if kind == "rotate":
                    rotated = str(info).split(";")[0]
                pos = int(end_log_pos)
            if rotated is not None:
                file, pos = rotated, 4
            elif len(events) < PAGE_EVENTS:
                break  # the end of the newest file
    yield Boundary(end, rows)


def boundary_after_rows(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition, max_rows: int
) -> BinlogPosition:
    """The first boundary after about ``max_rows`` estimated row changes, capped at ``end``.

    Always moves forward when ``start < end``: a transaction larger than ``max_rows`` is one
    batch of its own. Tries ``_skip_ahead`` first (cheap), then the exact scan.
    """
    found = _skip_ahead(source, start, end, max_rows)
    if found is not None:
        return found
    for boundary in scan_boundaries(source, start, end):
        if boundary.rows_before >= max_rows and boundary.position > start:
            return boundary.position
    return end


def small_batch(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition, max_rows: int, parts: int,
    *, part_rows: int = 0,
) -> list[tuple[BinlogPosition, BinlogPosition]] | None:
    """The decode ranges of all of ``(start, end]`` when it is one batch (fewer than about
    ``max_rows`` row changes before its last boundary) and fits in one sample: the answers
    of ``boundary_after_rows`` (``end``) and ``split_range`` from ONE listing.

    This is every batch of a stream that keeps up (what arrived since the last batch), where
    the two separate listings and their connections were ~50 ms of each batch's latency
    (docs/decisions/stream-as-spark-jobs.md, Latency). A range too short in bytes to hold
    ``max_rows`` estimated rows needs no listing at all. None when the range is larger or
    crosses a binlog file: the caller cuts and splits it as before.
    """
    if start.file != end.file or start >= end:
        return None
    # The rows that would end the batch, or (several parts) start a second part; 0: none.
    worth = max_rows if parts <= 1 else min(max_rows, part_rows) if part_rows > 0 else 0
    if (end.pos - start.pos) // MIN_EVENT_BYTES < worth:
        # Too few bytes to hold ``max_rows`` estimated rows (nor a second part's): the
        # listing could only answer (start, end] in one piece.
        return [(start, end)]
    with connect(source) as connection, connection.cursor() as cursor:
        cursor.execute(f"SHOW BINLOG EVENTS IN {connection.escape(start.file)} "
                       f"FROM {int(start.pos)} LIMIT {SAMPLE_EVENTS}")
        sample = cursor.fetchall()
    boundaries: list[Boundary] = []
    rows, reached = 0, len(sample) < SAMPLE_EVENTS
    for _log, event_pos, event_type, _server, end_log_pos, _info in sample:
        here = BinlogPosition(start.file, int(event_pos))
        if here >= end:
            reached = True
            break
        kind = str(event_type).lower()
        if kind == "rotate":
            return None
        if kind in _BOUNDARY_EVENTS and here > start:
            if rows >= max_rows:
                return None  # boundary_after_rows ends the batch here, before ``end``
            boundaries.append(Boundary(here, rows))
        rows += _rows_in(kind, int(event_pos), int(end_log_pos))
    if not reached:
        return None
    if parts <= 1:
        return [(start, end)]
    return cut_range([*boundaries, Boundary(end, rows)], start, end, parts, part_rows=part_rows)


def _skip_ahead(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition, max_rows: int
) -> BinlogPosition | None:
    """Sample the events after ``start``, then jump over the events ``max_rows`` rows need.

    ``SHOW BINLOG EVENTS ... LIMIT skip, n`` makes the server step over ``skip`` events
    without sending them: measured ~20x cheaper than listing them (100k events: 0.05 s vs
    0.95 s). Events per row come from the sample, so the batch holds *about* ``max_rows``.
    None when the answer needs the exact scan (the range crosses a binlog file).
    """
    with connect(source) as connection, connection.cursor() as cursor:
        file = connection.escape(start.file)
        cursor.execute(f"SHOW BINLOG EVENTS IN {file} FROM {int(start.pos)} LIMIT {SAMPLE_EVENTS}")
        sample = cursor.fetchall()
        rows, next_pos = 0, start.pos
        for log_name, event_pos, event_type, _server, end_log_pos, _info in sample:
            here = BinlogPosition(str(log_name), int(event_pos))
            kind = str(event_type).lower()
            if here >= end:
                return end
            if kind == "rotate":
                return None
            if kind in _BOUNDARY_EVENTS and here > start and rows >= max_rows:
                return here
            rows += _rows_in(kind, int(event_pos), int(end_log_pos))
            next_pos = int(end_log_pos)
        if len(sample) < SAMPLE_EVENTS:
            return end if end.file == start.file else None
        skip = int((max_rows - rows) * len(sample) / max(rows, 1))
        cursor.execute(
            f"SHOW BINLOG EVENTS IN {file} FROM {next_pos} LIMIT {max(0, skip)}, {PAGE_EVENTS}"
        )
        for log_name, event_pos, event_type, *_ in cursor.fetchall():
            here = BinlogPosition(str(log_name), int(event_pos))
            if here >= end:
                return end
            kind = str(event_type).lower()
            if kind == "rotate":
                return None
            if kind in _BOUNDARY_EVENTS:
                return here
        # Fewer events left in this file than the jump: the rest of the range is small.
        return end if end.file == start.file else None


def split_range(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition, parts: int,
    *, part_rows: int = 0,
) -> list[tuple[BinlogPosition, BinlogPosition]]:
    """``[start, end]`` cut into at most ``parts`` ranges of about equal size, at boundaries.

    ``part_rows`` (from the batching policy: ``max_rows / decode_partitions``) is the size
    a part is worth: a batch smaller than ``parts * part_rows`` gets fewer parts, so a small
    batch does not pay for several binlog connections.

    Inside one binlog file the cuts are found by bytes (``_split_file``: a sample and
    ``LIMIT skip, n`` jumps, a few cheap queries); a range that crosses files is listed event
    by event (``scan_boundaries``: exact, but measured 5.3 s for 60k rows in 200 transactions
    on the loaded development machine, more than decoding them).
    """
    if parts <= 1 or start >= end:
        return [(start, end)]
    if start.file == end.file:
        found = _split_file(source, start, end, parts, part_rows)
        if found is not None:
            return found
    return cut_range(list(scan_boundaries(source, start, end)), start, end, parts,
                     part_rows=part_rows)


def _split_file(
    source: MySQLSource, start: BinlogPosition, end: BinlogPosition, parts: int, part_rows: int
) -> list[tuple[BinlogPosition, BinlogPosition]] | None:
    """Cuts near ``start + i * bytes / parts`` inside one file. The first events are listed as
    a sample (events and rows per byte); a range that fits in the sample is cut exactly.
    Otherwise each cut skips the sampled estimate of events (the server steps over them
    without sending them) and takes the first transaction boundary at or after the byte target.
    None when the answer needs the exact scan (a rotate inside the range)."""
    with connect(source) as connection, connection.cursor() as cursor:
        file = connection.escape(start.file)
        cursor.execute(f"SHOW BINLOG EVENTS IN {file} FROM {int(start.pos)} LIMIT {SAMPLE_EVENTS}")
        sample = cursor.fetchall()
        boundaries: list[Boundary] = []
        rows, sample_end = 0, start.pos
        for _log, event_pos, event_type, _server, end_log_pos, _info in sample:
            here = BinlogPosition(start.file, int(event_pos))
            kind = str(event_type).lower()
            if here >= end:
                break
            if kind == "rotate":
                return None
            if kind in _BOUNDARY_EVENTS and here > start:
                boundaries.append(Boundary(here, rows))
            rows += _rows_in(kind, int(event_pos), int(end_log_pos))
            sample_end = int(end_log_pos)
        if len(sample) < SAMPLE_EVENTS or sample_end >= end.pos:
            return cut_range([*boundaries, Boundary(end, rows)], start, end, parts,
                             part_rows=part_rows)
        sampled_bytes = max(1, sample_end - start.pos)
        total_bytes = end.pos - start.pos
        if part_rows > 0:
            estimated_rows = total_bytes * rows / sampled_bytes
            parts = min(parts, max(1, -(-int(estimated_rows) // part_rows)))
        events_per_byte = len(sample) / sampled_bytes
        cuts: list[BinlogPosition] = []
        for index in range(1, parts):
            target = start.pos + total_bytes * index // parts
            origin = cuts[-1] if cuts else start
            cut = _boundary_from(cursor, file, origin, end, target, events_per_byte)
            if cut is None:
                break
            if cut > origin:
                cuts.append(cut)
    edges = [start, *cuts, end]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


def _boundary_from(
    cursor: object, file: str, origin: BinlogPosition, end: BinlogPosition, target: int,
    events_per_byte: float,
) -> BinlogPosition | None:
    """The first boundary at or after byte ``target`` (before ``end``), listing from the event
    at ``origin``. Skips 90% of the estimated events so the page usually starts just short
    of the target; a page that ends short moves on from its last event."""
    pos = origin.pos
    while pos < end.pos:
        skip = max(0, int((target - pos) * events_per_byte * 0.9))
        cursor.execute(  # type: ignore[attr-defined]
            f"SHOW BINLOG EVENTS IN {file} FROM {int(pos)} LIMIT {skip}, {PAGE_EVENTS}"
        )
        events = cursor.fetchall()  # type: ignore[attr-defined]
        if not events:
            return None
        for _log, event_pos, event_type, *_rest in events:
            here = int(event_pos)
            if here >= end.pos:
                return None
            kind = str(event_type).lower()
            if kind == "rotate":
                return None
            if kind in _BOUNDARY_EVENTS and here >= target and here > origin.pos:
                return BinlogPosition(origin.file, here)
        pos = int(events[-1][4])  # end_log_pos of the page's last event: the next event
        if len(events) < PAGE_EVENTS:
            return None
    return None


def cut_range(
    boundaries: list[Boundary], start: BinlogPosition, end: BinlogPosition, parts: int,
    *, part_rows: int = 0,
) -> list[tuple[BinlogPosition, BinlogPosition]]:
    """The cutting of ``split_range`` given the range's boundaries (``end`` last, holding the
    total): each cut is the boundary nearest to ``total * i / parts`` rows, cuts strictly
    increasing, so the parts are contiguous, in order, and never split a transaction (one
    huge transaction stays one part)."""
    total = boundaries[-1].rows_before if boundaries else 0
    if part_rows > 0:
        parts = min(parts, max(1, -(-total // part_rows)))
    inner = [b for b in boundaries if start < b.position < end]
    cuts: list[BinlogPosition] = []
    for index in range(1, parts):
        wanted = total * index / parts
        candidates = [b for b in inner if not cuts or b.position > cuts[-1]]
        if not candidates:
            break
        nearest = min(candidates, key=lambda b: (abs(b.rows_before - wanted), b.position))
        if nearest.rows_before <= 0 or nearest.rows_before >= total:
            continue  # an empty part on either side
        cuts.append(nearest.position)
    edges = [start, *cuts, end]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]

