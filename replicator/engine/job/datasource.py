"""The binlog as a Spark streaming source (pyspark's Python data source API).

The only module that registers a data source. Offsets are ``BinlogPosition.to_offset()``
dicts at transaction boundaries, so a micro-batch never holds half a transaction.

Where each method runs, and the measured pitfalls that shaped it:

- ``initialOffset``/``latestOffset``/``partitions``/``commit`` run in a long-lived Python
  planner process on the driver. ``initialOffset()`` is called *twice* for a new query:
  "latest" computed in it would move between the calls and lose rows, so the start position
  is resolved once by the runner and passed in as the ``start`` option.
- ``read`` runs on executors (a pickled copy of the reader): it decodes its range into
  change batches (``source.fast.columnar``) using its own server_id (pipeline server_id +
  partition index: a replica connection with a duplicate server_id kicks the other one off)
  and lands them as Parquet files (``engine.landing``).
- option keys arrive lower-cased, so every key here is lower case.
- ``latestOffset(start, limit)`` honours ``ReadMaxRows`` from ``batching.max_rows`` by
  finding a boundary after about that many row changes (``binlog_ranges``); with
  ``ReadAllAvailable`` (what Spark passes for some triggers) it returns the head. The next
  batch's end and decode ranges are worked out while a batch runs (``_Lookahead``).
- ``prepareForTriggerAvailableNow`` (``--until-caught-up``) pins the head seen at start, so
  the query stops once that is applied even while the source keeps writing.

The stream's rows are the manifest of the landed files (``engine.landing.MANIFEST_COLUMNS``):
one small row per file and per schema change, never a row image; the per-batch transform on
the driver reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from replicator.engine.job.errors import carried
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MIN_PARTITION_ROWS, MySQLSource, StartPosition
from replicator.model.selection import TableSelection, TableSelector
from replicator.source.binlog_ranges import boundary_after_rows, split_range
from replicator.source.positions import current_position, with_gtid

# Every Python worker Spark starts for this source imports this module (the lookup at session
# start, the planner, each reading task), and only the reading tasks decode: the landing zone
# and the decoder behind it (19 modules, 27 ms per process on an idle machine, as
# scripts/function-imports measures it) are imported by the two methods that need them.
SOURCE_FORMAT = "replicator_binlog"

# Options (lower case: Spark lower-cases option keys before the reader sees them).
OPT_SOURCE = "source"  # JSON of the MySQLSource fields except the password
OPT_PASSWORD = "password"  # its own key, so Spark's redaction regex hides it in plans
OPT_TABLES = "tables"  # TableSelector JSON: "db.table" names and `sources:` selections
OPT_KEYS = "keys"  # JSON {"db.table": [key columns]}
OPT_SERVER_ID = "server_id"
OPT_START = "start"  # JSON offset, resolved once by the runner
OPT_MAX_ROWS = "max_rows"
OPT_PARTITIONS = "decode_partitions"
OPT_LANDING = "landing"  # engine.landing, resolved (landing_root)
OPT_EPOCH = "epoch"  # the run's epoch: part of the landed files' names
OPT_UPLOAD = "upload"  # engine.job.stage_put.LandedUpload JSON (no secret), or empty
OPT_SELECTION_KEYS = "selection_keys"  # JSON [[TableSelection JSON, [key columns]], ...]


def reader_options(
    source: MySQLSource,
    *,
    tables: Sequence[str | TableSelection],
    keys: Mapping[str, Sequence[str]],
    server_id: int,
    start: BinlogPosition,
    max_rows: int,
    decode_partitions: int = 1,
    landing: str,
    epoch: int = 0,
    selection_keys: Sequence[tuple[TableSelection, Sequence[str]]] = (),
    upload: str = "",
) -> dict[str, str]:
    """The options of ``spark.readStream.format(SOURCE_FORMAT)`` for one pipeline.

    ``landing`` (a resolved ``engine.landing``): where executors write the change batches.
    ``keys`` and ``selection_keys``: the key columns whose pre-update values the change
    batches carry, by table and by selection. ``upload``: where each task PUTs the files
    it lands (``engine.job.stage_put``), or empty."""
    fields = asdict(source)
    fields.pop("password", None)
    fields.pop("start", None)  # the start is resolved: OPT_START
    return {
        OPT_SOURCE: json.dumps(fields),
        OPT_PASSWORD: source.password or "",
        OPT_TABLES: TableSelector.of(tables).to_json(),
        OPT_KEYS: json.dumps({table: list(columns) for table, columns in keys.items()}),
        OPT_SERVER_ID: str(server_id),
        OPT_START: json.dumps(start.to_offset()),
        OPT_MAX_ROWS: str(max_rows),
        OPT_PARTITIONS: str(decode_partitions),
        OPT_LANDING: landing,
        OPT_EPOCH: str(epoch),
        OPT_SELECTION_KEYS: json.dumps([[selection.to_json(), list(columns)]
                                        for selection, columns in selection_keys]),
        OPT_UPLOAD: upload,
    }


def partition_rows(max_rows: int, decode_partitions: int) -> int:
    """The rows one decode partition is worth: a full batch (``batching.max_rows``) makes
    ``decode_partitions`` parts, a smaller one fewer. Unbounded batches: MIN_PARTITION_ROWS."""
    if max_rows <= 0:
        return MIN_PARTITION_ROWS
    return max(1, -(-max_rows // max(1, decode_partitions)))


def source_from_options(options: Mapping[str, str]) -> MySQLSource:
    fields = json.loads(options[OPT_SOURCE])
    fields.pop("start", None)
    return MySQLSource(**fields, password=options.get(OPT_PASSWORD) or None, start=StartPosition())


class BinlogRange(InputPartition):
    """One executor task: decode the transactions committed in (start, end]."""

    def __init__(self, index: int, start: dict[str, Any], end: dict[str, Any]) -> None:
        super().__init__(index)
        self.index = index
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"BinlogRange({self.index}, {self.start} -> {self.end})"


Ranges = list[tuple[BinlogPosition, BinlogPosition]]


class _Lookahead:
    """Each micro-batch's end offset and decode ranges, the next batch's worked out while the
    current one runs (planner process, one thread of its own).

    Spark asks for a batch's end (``latestOffset``) and its partitions only once the batch
    before it is applied, and each answer costs server queries (``SHOW BINLOG EVENTS`` pages,
    ``BINLOG_GTID_POS``): measured 0.1-0.2 s per batch on the planner, in series with the
    batches. Both depend only on binlog events already written, which never change: an end
    found before the head it was computed with is the same end for any later head, so it is
    asked for ahead; one that *is* that head is asked again with the current head."""

    def __init__(self, end_after: Callable[[BinlogPosition, BinlogPosition, int], dict[str, Any]],
                 split: Callable[[BinlogPosition, BinlogPosition], Ranges]) -> None:
        self._end_after = end_after  # (begin, head, max_rows) -> the batch's end offset
        self._split = split  # (begin, finish) -> its decode ranges
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replicator-lookahead")
        self._ranges: tuple[BinlogPosition, BinlogPosition, Future[Ranges]] | None = None
        # (begin, max_rows, the head it was computed with, its (end offset, ranges))
        self._next: tuple[BinlogPosition, int, BinlogPosition, Future[Any]] | None = None

    def end(self, begin: BinlogPosition, head: BinlogPosition, max_rows: int) -> dict[str, Any]:
        """The end offset of the batch from ``begin`` (about ``max_rows`` row changes, at most
        ``head``); then the next batch's end is asked for ahead."""
        ahead = self._ahead(begin, head, max_rows)
        if ahead is None:
            offset = self._end_after(begin, head, max_rows)
            finish = BinlogPosition.from_offset(offset)
            ranges = self._pool.submit(self._split, begin, finish)
        else:
            offset, known = ahead
            finish = BinlogPosition.from_offset(offset)
            ranges = Future()
            ranges.set_result(known)
        self._ranges = (begin, finish, ranges)
        if finish < head:
            self._next = (finish, max_rows, head,
                          self._pool.submit(self._following, finish, head, max_rows))
        return offset

    def ranges(self, begin: BinlogPosition, finish: BinlogPosition) -> Ranges:
        """The decode ranges of (begin, finish]: worked out beside its end, else now."""
        known, self._ranges = self._ranges, None
        if known is not None and known[:2] == (begin, finish):
            ranges = _answer(known[2])
            if ranges is not None:
                return ranges
        return self._split(begin, finish)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _following(self, begin: BinlogPosition, head: BinlogPosition,
                   max_rows: int) -> tuple[dict[str, Any], Ranges]:
        offset = self._end_after(begin, head, max_rows)
        return offset, self._split(begin, BinlogPosition.from_offset(offset))

    def _ahead(self, begin: BinlogPosition, head: BinlogPosition,
               max_rows: int) -> tuple[dict[str, Any], Ranges] | None:
        """The answer asked for ahead, if it was for this batch and holds for ``head``."""
        ahead, self._next = self._next, None
        if ahead is None or ahead[:2] != (begin, max_rows):
            return None
        computed_with, future = ahead[2], ahead[3]
        answer = _answer(future)
        if answer is None or head < computed_with:
            return None
        found = BinlogPosition.from_offset(answer[0])
        return answer if found < computed_with or head == computed_with else None


def _answer(future: Future[Any]) -> Any:
    """A look-ahead's result; None when it failed (the caller asks again itself, and a
    lasting error then reaches the user as any other)."""
    try:
        return future.result()
    except Exception:
        return None


class BinlogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_FORMAT

    def schema(self) -> str:
        from replicator.engine.job.landing import MANIFEST_SCHEMA  # the decoder: see the top

        return MANIFEST_SCHEMA

    def streamReader(self, schema: Any) -> BinlogStreamReader:
        return BinlogStreamReader(dict(self.options))


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = {key.lower(): value for key, value in options.items()}
        self.start = BinlogPosition.from_offset(json.loads(self.options[OPT_START]))
        self.max_rows = int(self.options.get(OPT_MAX_ROWS, "0") or 0)
        self.decode_partitions = max(1, int(self.options.get(OPT_PARTITIONS, "1") or 1))
        self.server_id = int(self.options[OPT_SERVER_ID])
        self.tables = TableSelector.from_json(self.options[OPT_TABLES])
        self.keys = {t: list(c) for t, c in json.loads(self.options.get(OPT_KEYS, "{}")).items()}
        self.selection_keys = [
            (TableSelection.from_json(selection), list(columns))
            for selection, columns in json.loads(self.options.get(OPT_SELECTION_KEYS) or "[]")]
        self.landing = self.options[OPT_LANDING]
        self.epoch = int(self.options.get(OPT_EPOCH, "0") or 0)
        self.upload = self.options.get(OPT_UPLOAD, "")
        self._until: BinlogPosition | None = None  # set by prepareForTriggerAvailableNow
        self._planned: _Lookahead | None = None  # the planner's, made on first use

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the reader for its tasks: the planner's thread stays behind.
        return {**self.__dict__, "_planned": None}

    # -- driver side -----------------------------------------------------------------------

    def _source(self) -> MySQLSource:
        return source_from_options(self.options)

    def initialOffset(self) -> dict[str, Any]:
        return self.start.to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows > 0 else ReadAllAvailable()

    @carried  # its ReplicatorError reaches the driver with its hint
    def prepareForTriggerAvailableNow(self) -> None:
        self._until = current_position(self._source())

    def _head(self) -> BinlogPosition:
        if self._until is not None:
            return self._until
        return current_position(self._source())

    @carried  # its ReplicatorError reaches the driver with its hint
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = BinlogPosition.from_offset(start)
        head = self._head()
        if begin >= head:
            return begin.to_offset()
        if isinstance(limit, ReadMaxRows) and limit.max_rows > 0:
            return self._lookahead().end(begin, head, limit.max_rows)
        return head.to_offset()

    def _lookahead(self) -> _Lookahead:
        if self._planned is None:
            self._planned = _Lookahead(self._end_after, self._split)
        return self._planned

    def _end_after(self, begin: BinlogPosition, head: BinlogPosition, max_rows: int) -> dict[str, Any]:
        """The first transaction boundary after about ``max_rows`` row changes, at most ``head``."""
        # Offsets carry the GTID state: a failover resumes by it (source.gtid).
        boundary = boundary_after_rows(self._source(), begin, head, max_rows)
        return with_gtid(self._source(), boundary).to_offset()

    def _split(self, begin: BinlogPosition, finish: BinlogPosition) -> Ranges:
        """(begin, finish] in up to ``decode_partitions`` ranges, cut at transaction boundaries."""
        if self.decode_partitions <= 1:
            return [(begin, finish)]
        return split_range(self._source(), begin, finish, self.decode_partitions,
                           part_rows=partition_rows(self.max_rows, self.decode_partitions))

    @carried  # its ReplicatorError reaches the driver with its hint
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[BinlogRange]:
        begin, finish = BinlogPosition.from_offset(start), BinlogPosition.from_offset(end)
        if begin >= finish:
            return []
        ranges = self._lookahead().ranges(begin, finish)
        return [
            BinlogRange(index, a.to_offset(), b.to_offset()) for index, (a, b) in enumerate(ranges)
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to release: the binlog is the server's; retention is the user's setting."""

    def stop(self) -> None:
        if self._planned is not None:
            self._planned.close()

    # -- executor side ---------------------------------------------------------------------

    @carried  # its ReplicatorError reaches the driver with its hint
    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, BinlogRange)
        # Only the reading tasks decode (see the top).
        from replicator.engine.job.landing import land_range, manifest_batch
        from replicator.source.fast.columnar import KeyColumns

        manifest = land_range(
            self._source(), start=BinlogPosition.from_offset(partition.start),
            end=BinlogPosition.from_offset(partition.end), tables=self.tables,
            keys=KeyColumns(self.keys, self.selection_keys),
            server_id=self.server_id + partition.index, root=self.landing,
            epoch=self.epoch, part=partition.index)
        if self.upload:  # the driver only COPYs them (engine.job.stage_put)
            from replicator.engine.job.stage_put import LandedUpload

            upload = LandedUpload.from_json(self.upload)
            upload.put([row["path"] for row in manifest
                        if row["kind"] == "rows" and upload.wants(row["table"])])
        give_back_memory()
        if manifest:
            yield manifest_batch(manifest)


def give_back_memory() -> None:
    """Return the freed memory of a decode task to the operating system.

    Spark keeps a reused Python worker alive between micro-batches, idle, for the whole run.
    A task that decoded a big transaction freed its column builders and Arrow buffers, but
    the allocators keep the pages: measured on the 1M-row transaction, the worker stayed at
    ~300 MiB resident until the run ended (a sixth of the process tree's peak, held while the
    driver applied the batch). Releasing Arrow's unused pool memory and trimming glibc's heap
    brings it back to ~150 MiB, in well under a millisecond per task (``gc.collect`` would
    cost ~30 ms and freed nothing more: the decoder's structures hold no cycles)."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the C library this interpreter runs on
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return
    trim(0)
