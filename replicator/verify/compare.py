"""Source vs target, per key range, down to the differing keys.

Per table: the source is read in key order, ``segment_rows`` rows at a time (keyset
pagination); each page's key range ``(previous upper, this upper]`` is read from the target
too. Both sides are brought to one canonical form (``normalize``: the source staged by the
transform step's own DuckDB SQL, so the filter, computed columns, masks, DECIMAL scale,
TIMESTAMP UTC, TIME text, BIT bytes match)
and compared: equal ranges cost one pass over their rows; a range that differs is narrowed to
its keys, each reported as missing, extra or different (with both values of each column).
Keys whose order the warehouse does not share (strings under MySQL collations, masked keys)
are compared as one range.

``--wait``: keys that differ are looked up again on both sides until they agree or the
deadline passes (replication may be live); what still differs is reported with the lag
between the target's last applied batch and the binlog head.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from replicator.context import Context
from replicator.errors import ReplicatorError, UsageError
from replicator.model.catalog import Catalog, SourceTable
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import Pipeline
from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.model import Plan, PlannedColumn, TablePlan
from replicator.source.positions import current_position
from replicator.source.progress import lag_behind
from replicator.verify.checksum import TARGET_DIALECTS, ChecksumPlan, checksum_plan
from replicator.verify.normalize import (
    keeps_key_order,
    source_parameter,
    source_row_forms,
    target_row_form,
)
from replicator.verify.pace import Pacer, Unpaced
from replicator.verify.quantiles import OrdersDisagree, QuantileWalker
from replicator.verify.ranges import PARALLEL, RangeStats, RangeWalker
from replicator.verify.report import (
    ColumnDifference,
    KeyDifference,
    Lag,
    TableReport,
    VerifyReport,
)
from replicator.verify.slice import TableSlice, table_slice
from replicator.verify.source_side import SourceReader
from replicator.verify.target_side import TargetReader, VerifyError

SEGMENT_ROWS = 10_000
Rows = dict[tuple[Any, ...], tuple[Any, ...]]


class Progress(Protocol):
    """What a display learns while tables are compared (the CLI draws it; -q: nothing)."""

    def started(self, table: str, estimated_rows: int | None) -> None: ...

    def advance(self, table: str, rows: int) -> None: ...

    def done(self, report: TableReport) -> None: ...


class NoProgress:
    def started(self, table: str, estimated_rows: int | None) -> None:
        return None

    def advance(self, table: str, rows: int) -> None:
        return None

    def done(self, report: TableReport) -> None:
        return None


class TableVerifier:
    """Compares one table; keeps its readers open for re-checks."""

    def __init__(self, pipeline: Pipeline, source_table: SourceTable, table: TablePlan,
                 connection: Any, *, end_transaction: bool, source_name: str | None = None,
                 target_kind: str | None = None, slice_: TableSlice | None = None,
                 pacer: Pacer | Unpaced | None = None, progress: Progress | None = None
                 ) -> None:
        """``source_name``: for a routed target, the one source table (``db.table``) compared,
        against the target rows of its _SOURCE_TABLE. ``target_kind``: the warehouse
        (``duckdb``, ``snowflake``) whose SQL computes range checksums (None: rows are
        fetched). ``slice_``: only the rows of this condition, on both sides (``--where``);
        ``pacer``: paces the source's reads (``--max-rows-per-second``); ``progress``: told
        the source rows covered as they are."""
        self.table = table
        self.target_kind = target_kind
        self.columns: list[PlannedColumn] = list(table.data_columns)
        self.key_columns = list(table.key_columns)
        # The key the source pages by: a routed target's leading _SOURCE_TABLE is one value
        # per source table, so it neither orders nor bounds anything.
        self.order_columns = [c for c in self.key_columns if c.origin != "replicator"]
        self._key_at = [self.columns.index(c) for c in self.key_columns]
        self._target_form = target_row_form(self.columns)
        self._source_name = source_name
        self.slice = slice_
        self.pacer = pacer or Unpaced()
        self.progress = progress or NoProgress()
        self._source_table = source_table
        self._reader_args = (pipeline.source, source_table, table)
        self._reader_options: dict[str, Any] = {
            "source_name": source_name, "condition": slice_.source_sql if slice_ else None}
        self.source = SourceReader(*self._reader_args, **self._reader_options)
        self._source_columns = [(name, column.mysql_type if column else None) for name in
                                self.source.names for column in (source_table.column(name),)]
        self.target = TargetReader(connection, table, self.columns,
                                   end_transaction=end_transaction, source_name=source_name,
                                   condition=slice_.target_sql if slice_ else None)

    def close(self) -> None:
        self.source.close()

    # -- one side's rows, canonical, by canonical key ------------------------------------
    def _key(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(row[i] for i in self._key_at)

    def _forms(self, images: Iterable[dict[str, Any]]) -> list[tuple[tuple[Any, ...], bool]]:
        """Canonical rows as replication stages them (its own DuckDB SQL), and whether each
        passes the filter."""
        return source_row_forms(self.table, self.columns, list(images), self._source_columns,
                                source_name=self._source_name)

    def _source_rows(self, forms: Iterable[tuple[tuple[Any, ...], bool]]) -> Rows:
        # Filtered out: replication keeps the row out of the target.
        return {self._key(row): row for row, passes in forms if passes}

    def _target_rows(self, fetched: Iterable[Sequence[Any]],
                     duplicates: list[KeyDifference] | None = None) -> Rows:
        rows: Rows = {}
        for values in fetched:
            row = self._target_form(values)
            key = self._key(row)
            if key in rows and duplicates is not None:
                # A MERGE that inserted a key twice: a copy a dict would silently hide.
                duplicates.append(KeyDifference("duplicate", self._named(key)))
            rows[key] = row
        return rows

    def _named(self, key: tuple[Any, ...]) -> dict[str, Any]:
        names = [c.source_column or c.target_column for c in self.key_columns]
        return dict(zip(names, key, strict=True))

    # -- comparing ----------------------------------------------------------------------
    def _differences(self, source: Rows, target: Rows,
                     keys: Iterable[tuple[Any, ...]] | None = None) -> list[KeyDifference]:
        wanted = keys if keys is not None else sorted(set(source) | set(target), key=_sort_key)
        found = []
        for key in wanted:
            named = self._named(key)
            in_source, in_target = source.get(key), target.get(key)
            if in_source == in_target:
                continue
            if in_target is None:
                found.append(KeyDifference("missing", named))
            elif in_source is None:
                found.append(KeyDifference("extra", named))
            else:
                found.append(KeyDifference("different", named, tuple(
                    ColumnDifference(column.target_column, a, b)
                    for column, a, b in zip(self.columns, in_source, in_target, strict=True)
                    if a != b
                )))
        return found

    def checksum_plan(self) -> ChecksumPlan | list[str]:
        """The table's range-checksum queries, or why its rows must be fetched."""
        if self.target_kind is None:
            return ["checksums not asked for"]
        return checksum_plan(self.table, self.source.relation, self.target_kind,
                             self.target.scope,
                             [self.source.condition] if self.source.condition else [],
                             {c.name.lower(): c.charset for c in self._source_table.columns})

    def compare(self, report: TableReport, segment_rows: int, *, checksums: bool = False,
                walk: dict[str, int] | None = None) -> None:
        """Every key compared. ``checksums``: by range checksums computed inside both
        databases where the table allows (``checksum``), else (and by default) by fetching
        every row; ``walk``: the bisection's settings (``ranges.RangeWalker``)."""
        plan = self.checksum_plan() if checksums else None
        if isinstance(plan, ChecksumPlan):
            try:
                self._compare_by_checksum(report, plan, walk or {})
                return
            except OrdersDisagree as stop:
                # What the walk found the fetch finds again; the walk's cost stays counted.
                report.differences.clear()
                report.differing_segments = 0
                report.fetched_rows += stop.fetched
                plan = [f"its key {plan.key_source} is ordered differently by MySQL's "
                        f"collation and by the target's bytes (key ranges fetched "
                        f"{stop.fetched} rows, as many as fetching the table does)"]
        report.method = "fetch"
        report.fallback = list(plan or [])
        self._compare_by_fetch(report, segment_rows)

    def _compare_by_checksum(self, report: TableReport, plan: ChecksumPlan,
                             walk: dict[str, int]) -> None:
        report.method = "checksum"
        if plan.cut == "quantiles":
            self._compare_by_quantiles(report, plan, walk)
            return
        source_key, target_key = (self.source.quote(plan.key_source),
                                  quote_identifier(plan.key_target))
        scope = self.target.scope
        live = " WHERE " + " AND ".join(scope) if scope else ""
        sliced = f" WHERE {self.source.condition}" if self.source.condition else ""
        source_bounds = self.source.query(
            f"SELECT MIN({source_key}), MAX({source_key}) FROM {self.source.relation}{sliced}",
            [])[0]
        target_bounds = self.target.query(
            f"SELECT MIN({target_key}), MAX({target_key}) FROM "
            f"{qualified_name(self.table.target_parts)}{live}", [])[0]

        # One MySQL connection per parallel range query: the walk borrows one per query.
        readers: queue.SimpleQueue[SourceReader] = queue.SimpleQueue()
        extra = [SourceReader(*self._reader_args, **self._reader_options)
                 for _ in range(walk.get("parallel", PARALLEL) - 1)]
        for reader in [self.source, *extra]:
            readers.put(reader)

        def source_query(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
            reader = readers.get()
            try:
                return reader.query(sql, params)
            finally:
                readers.put(reader)

        def leaf(lower: int, upper: int) -> int:
            reader = readers.get()
            try:
                self.pacer.wait()
                images = reader.between(plan.key_source, lower, upper)
                self.pacer.charge(len(images))
            finally:
                readers.put(reader)
            fetched = self.target.between(plan.key_target, lower, upper)
            self._compare_fetched(report, self._forms(images), fetched)
            return len(images) + len(fetched)

        name = report.source_table
        walker = RangeWalker(plan, source=source_query, target=self.target.query, leaf=leaf,
                             pacer=self.pacer,
                             on_top=lambda rows: self.progress.advance(name, rows), **walk)
        try:
            stats = walker.walk(source_bounds, target_bounds, self.source.estimated_rows())
        finally:
            for reader in extra:
                reader.close()
        self._account(report, stats)

    def _compare_by_quantiles(self, report: TableReport, plan: ChecksumPlan,
                              walk: dict[str, int]) -> None:
        """A string or binary key: ranges cut at the source's quantile keys
        (``quantiles``). The two sides order such a key each their own way (MySQL's
        collation, the warehouse's bytes), so a leaf looks each key it found on one side
        only up by equality on both before naming it."""
        assert self.target_kind is not None  # checksum_plan: a warehouse with checksum SQL

        def leaf(lower: Any, upper: Any) -> int:
            self.pacer.wait()
            images = self.source.between(plan.key_source, lower, upper)
            self.pacer.charge(len(images))
            fetched = self.target.between(plan.key_target, _target_key(plan, lower),
                                          _target_key(plan, upper))
            found = TableReport(report.source_table, "")
            self._compare_fetched(found, self._forms(images), fetched)
            one_sided = [d for d in found.differences if d.kind in ("missing", "extra")]
            kept = [d for d in found.differences if d.kind not in ("missing", "extra")]
            if one_sided:
                kept += self.recheck(one_sided)
            if kept:
                report.differing_segments += 1
                report.differences += kept
            return len(images) + len(fetched) + 2 * len(one_sided)

        name = report.source_table
        walker = QuantileWalker(plan, TARGET_DIALECTS[self.target_kind],
                                source=self.source.query, target=self.target.query,
                                leaf=leaf, target_value=lambda v: _target_key(plan, v),
                                pacer=self.pacer,
                                on_top=lambda rows: self.progress.advance(name, rows), **walk)
        # OrdersDisagree: ``compare`` fetches instead.
        stats = walker.walk(self.source.estimated_rows())
        # A key both orders placed in different ranges, and different, is named by both
        # ranges' leaves: once is enough.
        unique = {(d.kind, tuple(d.key.items())): d for d in report.differences}
        report.differences[:] = list(unique.values())
        self._account(report, stats)

    def _account(self, report: TableReport, stats: RangeStats) -> None:
        """The walk's costs into the report, its differences in key order."""
        # Ranges are checked in parallel: the keys in key order, as a fetch lists them.
        report.differences.sort(key=lambda d: _sort_key(tuple(d.key.values())))
        report.source_rows += stats.source_rows
        report.target_rows += stats.target_rows
        report.segments += stats.ranges_equal + stats.leaves
        report.checksum_queries += stats.checksum_queries
        report.fetched_rows += stats.fetched_rows
        report.top_ranges += len(stats.top_ranges)
        report.slowest_query_seconds = max(
            (seconds for _, _, _, seconds in stats.top_ranges), default=0.0)

    def _compare_by_fetch(self, report: TableReport, segment_rows: int) -> None:
        if not keeps_key_order(self.order_columns):
            self.pacer.wait()
            forms = self._forms(self.source.everything())
            self.pacer.charge(len(forms))
            self.progress.advance(report.source_table, len(forms))
            self._compare_range(report, forms, None, None)
            return
        if self.pacer.rows_per_query is not None:  # pages of the pacer's share of rows
            segment_rows = min(segment_rows, self.pacer.rows_per_query)
        after: tuple[Any, ...] | None = None  # source-typed: MySQL's own key order
        lower: tuple[Any, ...] | None = None  # the same bound, target-typed
        while True:
            self.pacer.wait()
            page = self.source.page(after, segment_rows)
            self.pacer.charge(len(page))
            self.progress.advance(report.source_table, len(page))
            full = len(page) == segment_rows
            forms = self._forms(page)
            upper = self._key(forms[-1][0]) if full else None
            self._compare_range(report, forms, lower, upper)
            if not full:
                return
            after, lower = self.source.key_of(page[-1]), upper

    def _compare_range(self, report: TableReport, forms: list[tuple[tuple[Any, ...], bool]],
                       lower: tuple[Any, ...] | None, upper: tuple[Any, ...] | None) -> None:
        fetched = self.target.range(lower, upper)
        source_rows = self._compare_fetched(report, forms, fetched)
        report.segments += 1
        report.source_rows += source_rows
        report.target_rows += len(fetched)
        report.fetched_rows += len(forms) + len(fetched)

    def _compare_fetched(self, report: TableReport, forms: list[tuple[tuple[Any, ...], bool]],
                         fetched: Sequence[Sequence[Any]]) -> int:
        """One key range's rows of both sides compared exactly; its source rows in scope."""
        source = self._source_rows(forms)
        duplicates: list[KeyDifference] = []
        target = self._target_rows(fetched, duplicates)
        if source != target or duplicates:
            report.differing_segments += 1
            report.differences += self._differences(source, target) + duplicates
        return len(source)

    def recheck(self, differences: Sequence[KeyDifference]) -> list[KeyDifference]:
        """Look the keys up again on both sides; what still differs."""
        keys = [tuple(d.key.values()) for d in differences]
        if any(c.mask for c in self.key_columns):  # a hashed key cannot be looked up in MySQL
            fresh = TableReport(self.table.source_name, "")
            self.compare(fresh, SEGMENT_ROWS)
            return fresh.differences
        names = [c.source_column or c.target_column for c in self.key_columns]
        own = self.source.lookup_keys(keys, names)  # a routed source: without _SOURCE_TABLE
        self.pacer.wait()
        images = self.source.lookup([tuple(source_parameter(v) for v in key) for key in own])
        self.pacer.charge(len(images))
        source = self._source_rows(self._forms(images))
        duplicates: list[KeyDifference] = []
        target = self._target_rows(self.target.lookup(keys), duplicates)
        return self._differences(source, target, keys) + duplicates


def _target_key(plan: ChecksumPlan, value: Any) -> Any:
    """A key value the source sent, as the warehouse's parameter: a string key's text (the
    driver sends a binary collation's as bytes), a binary key's bytes."""
    if plan.key_kind == "string" and isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return value


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((value is None, str(type(value)), value if value is not None else 0)
                 for value in key)


def _lag(pipeline: Pipeline, sink: Any, table: TablePlan) -> Lag:
    head = current_position(pipeline.source)
    try:
        last = sink.last_applied(table)
    except ReplicatorError:
        last = None
    offset = (last or {}).get("end_offset")
    if not offset or "file" not in offset:
        return Lag(applied=None, head=str(head))
    applied = BinlogPosition.from_offset(offset)
    behind = lag_behind(pipeline.source, applied, head)
    return Lag(applied=str(applied), head=str(head), lag_bytes=behind.bytes,
               lag_files=behind.files)


def _comparisons(chosen: Sequence[TablePlan],
                 names: Sequence[str] | None) -> list[tuple[TablePlan, str]]:
    """(plan, source table) pairs to compare: a routed target once per source table it reads
    (only the named ones when ``--table`` names source tables)."""
    wanted = {name.lower() for name in names or ()}
    pairs = []
    for table in chosen:
        if not table.routed:
            pairs.append((table, table.source_name))
            continue
        sources = list(table.sources)
        named = [s for s in sources if s.lower() in wanted]
        pairs += [(table, s) for s in (named or sources)]
    return pairs


def _source_table(catalog: Catalog, name: str) -> SourceTable:
    source_table = catalog.table(*name.split(".", 1))
    assert source_table is not None  # Context.plan checked
    return source_table


def verify_pipeline(
    pipeline: Pipeline,
    *,
    tables: Sequence[str] | None = None,
    wait_s: float = 0.0,
    segment_rows: int = SEGMENT_ROWS,
    sink: Any = None,
    checksums: bool = True,
    walk: dict[str, Any] | None = None,
    on_compared: Callable[[VerifyReport, Plan, Catalog], None] | None = None,
    where: str | None = None,
    pacer: Pacer | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Compare every (or the named) table of the pipeline: source vs target, key by key.

    ``sink``: an open sink to read the target through (default: ``open_sink``, closed
    afterwards). ``wait_s``: re-check differing keys until they agree or this many seconds
    have passed. ``checksums``: compare by range checksums computed inside both databases
    where a table allows (``verify.checksum``; False: fetch every row); ``walk``: the
    bisection's settings (``factor``, ``leaf_rows``, ``query_rows``). ``on_compared``:
    called once every table is compared, before ``wait_s``' re-checks (``--repair`` asks for
    the re-copies there, then the re-checks see them land). ``where``: only the rows of this
    MySQL condition, on both sides, of the named ``tables`` (``verify.slice``; refused with
    ``UsageError`` where the target cannot select the same rows). ``pacer``: paces the
    source's reads (``verify.pace``); ``progress``: told what is compared as it goes. Raises
    ``VerifyError`` (exit 2) when it cannot compare.
    """
    if where is not None and not tables:
        raise UsageError("--where needs --table: a condition is over one table's columns",
                         hint="name the tables it applies to: --table db.t --where \"...\"")
    context = Context(pipeline)
    catalog, plan = context.catalog, context.plan
    own_sink = sink is None
    if sink is None:
        sink = context.open_sink()
    # A column added in MySQL that the run ignores (`add_column: ignore`) is no difference:
    # from the checkpoint's record, or found as the run would find it (never recorded here).
    if context.ignore_missing_columns(sink, record=False):
        plan = context.plan
    chosen = list(plan.tables)
    if tables:
        try:
            chosen = list(dict.fromkeys(plan.table(name) for name in tables))
        except KeyError as exc:
            raise VerifyError(
                f"pipeline {pipeline.name} has no table {exc.args[0]!r}",
                hint="--table takes a source name (db.table) or a target table name: "
                + ", ".join(t.source_name for t in plan.tables),
            ) from None
    pairs = _comparisons(chosen, tables)
    # Every slice is checked before any table is read: a refused condition costs nothing.
    slices = {name: table_slice(where, _source_table(catalog, name), table, plan.target_kind)
              for table, name in pairs if where is not None and table.outbox is None}
    report = VerifyReport(pipeline.name, checked={
        "tables": [name for _, name in pairs], "where": where,
        "method": "auto" if checksums else "fetch",
        "max_rows_per_second": pacer.rows_per_second if pacer is not None else None,
    })
    progress = progress or NoProgress()
    verifiers: dict[str, TableVerifier] = {}
    try:
        for table, name in pairs:
            source_table = _source_table(catalog, name)
            if table.outbox is not None:
                # Its rows are derived from events, most of them no longer in the outbox
                # (deleted right after insert): there is no source row to compare with.
                report.tables.append(TableReport(
                    table.label, ".".join(table.target_parts),
                    skipped="an outbox route: its rows come from outbox events, not from "
                    "source rows, so there is nothing to compare them with"))
                continue
            if not table.source_key:  # a changelog of a table without a primary key
                if tables:
                    raise VerifyError(f"{table.source_name} has no key to compare rows by",
                                      hint="declare `key:` for the table, or leave it out of "
                                      "--table")
                report.tables.append(TableReport(
                    table.source_name, ".".join(table.target_parts),
                    skipped="no key to compare rows by (declare `key:`)"))
                continue
            started = time.perf_counter()
            verifier = TableVerifier(pipeline, source_table, table, sink.connection,
                                     end_transaction=plan.target_kind == "snowflake",
                                     source_name=name if table.routed else None,
                                     target_kind=plan.target_kind, slice_=slices.get(name),
                                     pacer=pacer, progress=progress)
            verifiers[name] = verifier
            table_report = TableReport(name, ".".join(table.target_parts),
                                       slice=slices.get(name))
            # A slice's share of the table is unknown: the display counts rows without a total.
            progress.started(name, None if where else verifier.source.estimated_rows())
            verifier.compare(table_report, segment_rows, checksums=checksums, walk=walk)
            table_report.seconds = time.perf_counter() - started
            report.tables.append(table_report)
            progress.done(table_report)
        if on_compared is not None:
            on_compared(report, plan, catalog)
        deadline = time.monotonic() + wait_s
        while not report.equal and time.monotonic() < deadline:
            time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
            for table_report in report.tables:
                if table_report.differences:
                    table_report.differences = verifiers[table_report.source_table].recheck(
                        table_report.differences)
                    table_report.rechecks += 1
        for table_report in report.tables:
            if table_report.differences:
                table_report.lag = _lag(pipeline, sink, plan.table(table_report.source_table))
    finally:
        for verifier in verifiers.values():
            verifier.close()
        if own_sink:
            sink.close()
    return report
