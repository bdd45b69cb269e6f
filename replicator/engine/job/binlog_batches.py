"""The binlog as micro-batches: the driver cuts them, Spark's tasks decode and land them.

The driver (``engine.stream``) asks for each batch's end and its decode ranges; a Spark job of
one task per range (``land``, on the executors) decodes its range into change batches
(``source.fast.columnar``) and lands them as Parquet files (``engine.landing``), returning the
manifest rows of the files: one small row per file and per schema change, never a row image.
Positions are ``BinlogPosition.to_offset()`` dicts at transaction boundaries, so a micro-batch
never holds half a transaction.

- ``end_after`` honours ``batching.max_rows`` by finding a boundary after about that many row
  changes (``binlog_ranges``); the next batch's end and decode ranges are worked out while a
  batch runs (``_Lookahead``).
- ``pin_head`` (``--until-caught-up``) fixes the head seen at start, so the stream stops once
  that is applied even while the source keeps writing.
- each task reads with its own server_id (pipeline server_id + range index: a replica
  connection with a duplicate server_id kicks the other one off).

Until session 13 this was a Structured Streaming source (pyspark's Python data source API):
the same offsets and ranges, asked for by a planner process of Spark's own, and five more
Python processes started one after another per run (docs/decisions/stream-as-spark-jobs.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from replicator.engine.job.errors import carried
from replicator.engine.job.landing import land_range
from replicator.engine.job.stage_put import LandedUpload
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MIN_PARTITION_ROWS, MySQLSource
from replicator.model.selection import TableSelection, TableSelector
from replicator.source.binlog_ranges import boundary_after_rows, small_batch, split_range
from replicator.source.fast.columnar import KeyColumns
from replicator.source.positions import current_position, with_gtid


def partition_rows(max_rows: int, decode_partitions: int) -> int:
    """The rows one decode partition is worth: a full batch (``batching.max_rows``) makes
    ``decode_partitions`` parts, a smaller one fewer. Unbounded batches: MIN_PARTITION_ROWS."""
    if max_rows <= 0:
        return MIN_PARTITION_ROWS
    return max(1, -(-max_rows // max(1, decode_partitions)))


Ranges = list[tuple[BinlogPosition, BinlogPosition]]


class _Lookahead:
    """Each micro-batch's end offset and decode ranges, the next batch's worked out while the
    current one runs (a thread of the driver's own).

    A batch's end and its decode ranges are needed only once the batch before it is applied,
    and each answer costs server queries (``SHOW BINLOG EVENTS`` pages, ``BINLOG_GTID_POS``):
    measured 0.1-0.2 s per batch, in series with the batches. Both depend only on binlog events already written, which never change: an end
    found before the head it was computed with is the same end for any later head, so it is
    asked for ahead; one that *is* that head is asked again with the current head.

    A stream that keeps up cuts every batch at the head (it holds what arrived since the last
    one), and nothing can be asked ahead of that: ``small`` answers such a batch's end and
    ranges from one listing, before the two separate questions are asked."""

    def __init__(self, end_after: Callable[[BinlogPosition, BinlogPosition, int], dict[str, Any]],
                 split: Callable[[BinlogPosition, BinlogPosition], Ranges],
                 small: Callable[[BinlogPosition, BinlogPosition, int],
                                 tuple[dict[str, Any], Ranges] | None]) -> None:
        self._end_after = end_after  # (begin, head, max_rows) -> the batch's end offset
        self._split = split  # (begin, finish) -> its decode ranges
        # (begin, head, max_rows) -> (head's offset, ranges) when all of it is one batch
        self._small = small
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replicator-lookahead")
        self._ranges: tuple[BinlogPosition, BinlogPosition, Future[Ranges]] | None = None
        # (begin, max_rows, the head it was computed with, its (end offset, ranges))
        self._next: tuple[BinlogPosition, int, BinlogPosition, Future[Any]] | None = None

    def end(self, begin: BinlogPosition, head: BinlogPosition, max_rows: int) -> dict[str, Any]:
        """The end offset of the batch from ``begin`` (about ``max_rows`` row changes, at most
        ``head``); then the next batch's end is asked for ahead."""
        ahead = self._ahead(begin, head, max_rows)
        if ahead is None:
            ahead = self._small(begin, head, max_rows)
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




@dataclass(frozen=True)
class DecodeRange:
    """One Spark task: decode the transactions committed in (start, end]."""

    index: int
    start: dict[str, Any]
    end: dict[str, Any]


class BinlogBatches:
    """One pipeline's binlog, cut into micro-batches on the driver and decoded by Spark tasks.

    ``keys`` and ``selection_keys``: the key columns whose pre-update values the change
    batches carry, by table and by selection. ``landing`` (a resolved ``engine.landing``):
    where the tasks write. ``upload``: where each task PUTs the files it lands
    (``engine.job.stage_put.LandedUpload`` JSON), or empty. Spark pickles this object into
    its tasks (``land``); the planner's thread stays on the driver."""

    def __init__(
        self, source: MySQLSource, *, tables: Sequence[str | TableSelection],
        keys: Mapping[str, Sequence[str]], server_id: int, max_rows: int,
        decode_partitions: int = 1, landing: str, epoch: int = 0,
        selection_keys: Sequence[tuple[TableSelection, Sequence[str]]] = (), upload: str = "",
    ) -> None:
        self.source = source
        self.tables = TableSelector.of(tables)
        self.keys = {table: list(columns) for table, columns in keys.items()}
        self.selection_keys = [(selection, list(columns)) for selection, columns in selection_keys]
        self.server_id = server_id
        self.max_rows = max_rows
        self.decode_partitions = max(1, decode_partitions)
        self.landing = landing
        self.epoch = epoch
        self.upload = upload
        self._until: BinlogPosition | None = None  # set by pin_head
        self._planned: _Lookahead | None = None  # made on first use

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_planned": None}

    # -- driver side -----------------------------------------------------------------------

    def pin_head(self) -> None:
        """Stop at the head as it is now (``--until-caught-up``)."""
        self._until = current_position(self.source)

    def head(self) -> BinlogPosition:
        """Where the binlog ends now (the pinned head, if pinned)."""
        return self._until if self._until is not None else current_position(self.source)

    def end_after(self, begin: BinlogPosition, head: BinlogPosition) -> dict[str, Any]:
        """The end offset of the batch from ``begin``: about ``batching.max_rows`` row changes,
        at most ``head``."""
        if self.max_rows <= 0:
            return head.to_offset()
        return self._lookahead().end(begin, head, self.max_rows)

    def ranges(self, start: dict[str, Any], end: dict[str, Any]) -> list[DecodeRange]:
        """The decode tasks of (start, end]: up to ``decode_partitions``, cut at transaction
        boundaries."""
        begin, finish = BinlogPosition.from_offset(start), BinlogPosition.from_offset(end)
        if begin >= finish:
            return []
        return [DecodeRange(index, a.to_offset(), b.to_offset())
                for index, (a, b) in enumerate(self._lookahead().ranges(begin, finish))]

    def close(self) -> None:
        if self._planned is not None:
            self._planned.close()

    def _lookahead(self) -> _Lookahead:
        if self._planned is None:
            self._planned = _Lookahead(self._end_after, self._split, self._small)
        return self._planned

    def _end_after(self, begin: BinlogPosition, head: BinlogPosition, max_rows: int) -> dict[str, Any]:
        # Offsets carry the GTID state: a failover resumes by it (source.gtid).
        boundary = boundary_after_rows(self.source, begin, head, max_rows)
        return with_gtid(self.source, boundary).to_offset()

    def _small(self, begin: BinlogPosition, head: BinlogPosition,
               max_rows: int) -> tuple[dict[str, Any], Ranges] | None:
        ranges = small_batch(self.source, begin, head, max_rows, self.decode_partitions,
                             part_rows=partition_rows(max_rows, self.decode_partitions))
        if ranges is None:
            return None
        # The head was read with the GTID state at it (source.positions.head_with_gtid), so
        # the batch's end needs no BINLOG_GTID_POS, which reads the binlog file from its start.
        end = head if head.gtid is not None else with_gtid(self.source, head)
        return end.to_offset(), ranges

    def _split(self, begin: BinlogPosition, finish: BinlogPosition) -> Ranges:
        if self.decode_partitions <= 1:
            return [(begin, finish)]
        return split_range(self.source, begin, finish, self.decode_partitions,
                           part_rows=partition_rows(self.max_rows, self.decode_partitions))

    # -- executor side ---------------------------------------------------------------------

    @carried  # its ReplicatorError reaches the driver with its hint
    def land(self, task: DecodeRange) -> list[dict[str, Any]]:
        """Decode ``task``'s range into the landing zone (a Spark task); its manifest rows."""
        manifest = land_range(
            self.source, start=BinlogPosition.from_offset(task.start),
            end=BinlogPosition.from_offset(task.end), tables=self.tables,
            keys=KeyColumns(self.keys, self.selection_keys),
            server_id=self.server_id + task.index, root=self.landing,
            epoch=self.epoch, part=task.index)
        if self.upload:  # the driver only COPYs them (engine.job.stage_put)
            upload = LandedUpload.from_json(self.upload)
            upload.put([row["path"] for row in manifest
                        if row["kind"] == "rows" and upload.wants(row["table"])])
        give_back_memory()
        return manifest

    def decode(self, context: Any, tasks: Sequence[DecodeRange]) -> list[dict[str, Any]]:
        """Run ``tasks`` as one Spark job (``context``: the SparkContext); the manifest rows of
        every task, in task order."""
        if not tasks:
            return []
        land = self.land
        return [row for rows in context.parallelize(list(tasks), len(tasks)).map(land).collect()
                for row in rows]


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
