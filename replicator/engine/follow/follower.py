"""How a micro-batch's DDL reaches the target: the schema-change half of ``BatchApplier``.

``SchemaFollower`` is the mixin ``engine.apply.applier.BatchApplier`` applies batches with: before a
batch's rows, ``follow_schema_changes`` reads each DDL row of the manifest, lets
``engine.follow.schema_changes.decide`` judge it by the table's `schema_changes:` policy, and does
what it says: stop with the remedy; re-plan and ALTER the target (added, renamed, widened,
dropped columns: ``_alter_columns``); delete the target rows of a followed TRUNCATE; re-create
a column whose type the target cannot change in place and queue the table's copy
(``_retype``); stop the stream for a changed primary key (``KeyChanged``, then ``rekey``);
follow tables coming and going under a `sources:` selection (``engine.follow.routing``). Changes of
a table before such a point are cut from the batch (``_cut``): a TRUNCATE emptied it, or its
copy, queued after them, rewrites every row.

It shares the applier's state (``sink``, ``plan``, ``pipeline``, the callbacks, the cuts),
set by ``BatchApplier.__init__``; it is a mixin, not a collaborator, because every step here
reads and replaces that state (a re-plan swaps the sink).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from replicator.context import Context
from replicator.engine.follow.ddl_rows import last_before, row_position
from replicator.engine.follow.intent import ChangeKind, ColumnChange, DdlEffect, classify
from replicator.engine.follow.routing import SourcesToCopy, follow_routed_change
from replicator.engine.follow.schema_changes import (
    KeyChanged,
    Step,
    cannot_follow,
    decide,
    policy_for,
    retype_step,
    stop_error,
    widens,
)
from replicator.errors import EngineError
from replicator.model import change_batch as cb
from replicator.plan.identifiers import target_identifier
from replicator.plan.program import Statement, TruncateAt, retype_columns
from replicator.plan.statements import ddl
from replicator.plan.types import lags_plan, widened_from
from replicator.source.positions import current_position

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan, PlannedColumn, TablePlan


class SchemaFollower:
    """The schema-change steps of ``BatchApplier`` (see the module docstring)."""

    # The state it shares with the applier, set by ``BatchApplier.__init__``.
    pipeline: Pipeline
    plan: Plan
    sink: Any
    renamed_columns: dict[str, dict[str, str]]
    copied_sources: set[str]
    _cut: dict[str, tuple[int, int]]
    _ddl_at: dict[str, tuple[int, int]]
    _copied_from: dict[str, tuple[int, int]]
    _evolving: dict[str, Any]
    _unplanned: set[str]
    _batch_id: int
    # followed TRUNCATEs in this batch, by target (``_truncate``)
    _truncates: dict[tuple[str, ...], list[TruncateAt]]

    def _replicated(self) -> dict[str, TablePlan]:
        return {table.source_name.lower(): table for table in self.plan.tables
                if not table.routed}

    def _routed(self, name: str) -> bool:
        """Whether ``db.table`` feeds a routed target (matches a `sources:` selection)."""
        return any(table.routed and table.reads(name) for table in self.plan.tables)

    def plan_unplanned_sources(self, names: Iterable[str]) -> None:
        """Rows of a table a selection matches that is not covered: it came to exist during
        this run without a CREATE the reader saw (MariaDB logs CREATE TABLE ... SELECT inside
        the transaction of its rows), so it streamed from its creation: record it as covered
        (no copy at the next start), and re-plan if the plan does not list it yet.

        A table renamed into the selection never gets here uncovered: its RENAME precedes its
        rows in the binlog, and schema changes are followed before a batch's rows
        (``SourcesToCopy`` has the runner copy it first)."""
        new = [name for name in names if name not in self._unplanned and self._routed(name)
               and not self._covers(name)]
        if not new:
            return
        self._unplanned.update(new)
        planned = {name.lower() for t in self.plan.tables if t.routed for name in t.sources}
        if any(name not in planned for name in new):
            self._evolve(new)
        elif self._on_new_sources is not None:
            self._on_new_sources(new)

    def follow_schema_changes(self, ddl_rows: list[dict[str, Any]],
                               with_rows: Iterable[str] = ()) -> None:
        """``with_rows``: the (lower-case) tables the batch has row changes of."""

        replicated = self._replicated()
        self._evolving: dict[str, Any] = {}  # db.table (lower) -> its Decisions (_follow_decided)
        # The routed tables the pipeline covers (see ``_covers``), and those the runner has
        # copied after a SourcesToCopy in this run.
        known = {name.lower() for t in self.plan.tables if t.routed for name in t.sources
                 if self._covers(name)}
        known |= self.copied_sources
        evolve = False
        created: list[str] = []  # tables a selection matches, CREATEd in this batch
        for row in ddl_rows:
            details = _ddl_details(row)
            tables = [str(t) for t in details.get("tables", [])]
            sql = str(details.get("sql", "")).strip()
            where = f"{row['file']}:{row['pos']}" if row.get("file") else "the binlog"
            # Tables a `sources:` selection matches (or matched) come and go by design.
            routed = [t for t in tables if t.lower() in known or self._routed(t)]
            database = str(details.get("database") or "").lower()
            fixed = any(t.lower() in replicated for t in tables)
            if routed and not fixed:
                try:
                    followed = follow_routed_change(str(details.get("kind")), tables, routed,
                                                    known, sql, where)
                except SourcesToCopy:
                    # The batch is replayed after the copy, CREATEs included: the tables
                    # created before this RENAME, and those whose first rows are in it (see
                    # plan_unplanned_sources), stream from there and need no copy.
                    renamed = {str(name).lower() for r in ddl_rows
                               for d in [_ddl_details(r)] if d.get("kind") == "rename"
                               for name in d.get("tables", [])[1::2]}
                    created += [name for name in with_rows if name not in known
                                and name not in renamed and self._routed(name)]
                    if created and self._on_new_sources is not None:
                        self._on_new_sources(list(dict.fromkeys(created)))
                    raise
                if details.get("kind") == "create":
                    created += [t for t in routed if t.lower() not in known]
                if followed:
                    evolve = True
                    continue
            touched = [t for t in tables if t.lower() in replicated]
            if not details.get("tables") and details.get("kind") == "drop" and any(
                name.split(".", 1)[0] == database for name in replicated
            ):
                touched = [database]  # DROP DATABASE of a replicated schema
            if not details.get("tables") and details.get("kind") == "drop" and any(
                name.split(".", 1)[0] == database for name in known
            ):
                evolve = True  # DROP DATABASE of a shard: its tables stop being read
            if not touched and not routed:
                continue  # DDL on a table this pipeline does not replicate
            intent = classify(sql)
            if intent.effect is DdlEffect.NOTHING:
                if self._on_notice:
                    self._on_notice(f"schema change on {', '.join(touched or routed)} at {where} "
                                    f"ignored: {intent.what} changes nothing replicated")
                continue
            if touched and touched != [database]:
                # A replicated table: its `schema_changes:` policy decides, change by change.
                self._follow_decided(details, touched, replicated, intent, sql, where, row)
                continue
            if routed and intent.changes and all(
                    change.kind is ChangeKind.TRUNCATE for change in intent.changes):
                self._truncate_routed(routed, intent, sql, where, row)
                continue
            if intent.effect is DdlEffect.ADD_COLUMNS:
                evolve = True
                continue
            raise cannot_follow(touched or routed, where, intent, sql)
        if self._evolving:
            old_plan = self.plan
            self._rename_columns(old_plan)
            self._evolve(created, handled=set(self._evolving))
            self._alter_columns(old_plan)
        elif evolve:
            self._evolve(created)

    def _follow_decided(self, details: dict[str, Any], touched: list[str],
                        replicated: dict[str, TablePlan], intent: Any, sql: str,
                        where: str, row: dict[str, Any]) -> None:
        """Apply ``engine.follow.schema_changes.decide`` to a DDL of replicated tables: raise its stop,
        log what it ignores; record the tables whose columns change (``_evolving``)."""

        arriving = ({str(name).lower() for name in details.get("tables", [])[1::2]}
                    if details.get("kind") == "rename" else set())
        for name in touched:
            decision = decide(intent, self.pipeline, name, replicated[name.lower()],
                              renamed_onto=name.lower() in arriving)
            stop = decision.stop
            if stop is not None:
                raise stop_error([name], where, stop, sql)
            at = self._ddl_at[name.lower()] = row_position(row)
            if (any(step.change.kind is ChangeKind.KEY_CHANGE for step in decision.recopying)
                    and not at <= self._copied_from.get(name.lower(), (-1, -1))):
                # Not yet streamed with the key the catalog has: stop the query here (rekey).
                raise KeyChanged([replicated[name.lower()].source_name], where, sql)
            if any(step.change.kind is ChangeKind.RENAME_TABLE for step in decision.recopying):
                self._recopy_swapped(replicated[name.lower()])
            self._follow_declared_columns(name, decision)
            added_ignored = [step.change.column or "" for step in decision.steps
                             if step.action == "ignore"
                             and step.change.kind is ChangeKind.ADD_COLUMN]
            if added_ignored:
                # Remembered before the re-plan leaves them out (a replay records it again).
                Context(self.pipeline).ignore_columns(name, added_ignored)
            if any(step.action in ("follow", "ignore", "recopy")
                   and step.change.kind.value in _COLUMN_KINDS for step in decision.steps):
                # The target's columns change: re-plan, then _alter_columns does the rest.
                self._evolving.setdefault(name.lower(), []).append(decision)
            for step in decision.following(ChangeKind.RENAME_COLUMN):
                self.renamed_columns.setdefault(name.lower(), {})[
                    step.change.new_name or ""] = step.change.column or ""
            if decision.following(ChangeKind.TRUNCATE):
                self._truncate(replicated[name.lower()], row)
            self._notice_unfollowed(name, where, decision)

    def _follow_declared_columns(self, name: str, decision: Any) -> None:
        """The YAML's settings follow their column (``model.followed``): a rename or drop of
        a column it names is recorded (the checkpoint's ``followed_columns.json``) before the
        re-plan, whatever the step does to the target (an excluded column renamed is
        "nothing" there, and must stay excluded). A replay records nothing new."""
        context = Context(self.pipeline)
        changed = False
        for step in decision.steps:
            kind = step.change.kind
            if step.action == "stop" or kind not in (ChangeKind.RENAME_COLUMN,
                                                     ChangeKind.DROP_COLUMN):
                continue
            changed |= context.follow_column(
                name, step.change.column or "",
                step.change.new_name if kind is ChangeKind.RENAME_COLUMN else None)
        if changed:
            self.pipeline = context.pipeline

    def _notice_unfollowed(self, name: str, where: str, decision: Any) -> None:
        for step in decision.steps:
            if step.action in ("ignore", "nothing") and self._on_notice:
                self._on_notice(f"schema change on {name} at {where}: {step.why}: "
                                + ("ignored (schema_changes policy)" if step.action == "ignore"
                                   else "nothing replicated changes"))

    def _truncate_routed(self, routed: list[str], intent: Any, sql: str, where: str,
                         row: dict[str, Any]) -> None:
        """TRUNCATE of a table a `sources:` selection feeds into a shared target: the target
        table's `truncate` policy decides; followed, only that table's rows go (its
        ``_SOURCE_TABLE``), the other tables' rows and changes are untouched."""
        for name in routed:
            table = next((t for t in self.plan.tables if t.routed and t.reads(name)), None)
            if table is None:
                continue  # matched once, not read any more (dropped or renamed away)
            decision = decide(intent, self.pipeline, name, table)
            stop = decision.stop
            if stop is not None:
                raise stop_error([name], where, stop, sql)
            if decision.following(ChangeKind.TRUNCATE):
                # As `_SOURCE_TABLE` holds it: the name the live catalog (and the binlog's
                # row events) give the table, whatever case the statement wrote.
                known = next((s for s in table.sources if s.lower() == name.lower()), name)
                self._truncate(table, row, source=known)
            self._notice_unfollowed(name, where, decision)

    def _recopy_swapped(self, table: TablePlan) -> None:
        """`rename_table: recopy`: a table swapped onto the replicated name is read on under it
        (the re-plan takes its columns, as `follow` does) and its copy is queued afresh and
        saved (the runner's ``on_recopy``) before the batch is applied, so a crash from here
        on still copies it. Its rows were written outside the replicated set: the copy brings
        those only it has, and its end removes the target rows it lacks (``engine.recopy``).
        Nothing of the batch is cut: its changes of the old table are overwritten or removed
        by the copy, and those after the swap stream on top of the copy's chunks."""

        if self._on_recopy is None:
            raise EngineError(f"{table.source_name}: a table swapped onto the name needs the "
                              "table copied again, and this applier cannot queue a copy",
                              hint="run the pipeline with `replicator run`")
        # With this batch's id: the batch applied again (Spark replays it when a crash came
        # between its commit and Spark's; the RENAME statement names the table twice) finds
        # the copy it queued, maybe under way, and leaves it be (engine.recopy.queue).
        self._on_recopy(table.source_name, self._batch_id)
        self._notice(f"{table.source_name}: a table was renamed onto the name: reading on "
                     "under it and copying it again chunk by chunk between stream batches "
                     "(`rename_table: recopy`)")

    def _truncate(self, table: TablePlan, row: dict[str, Any], source: str | None = None
                  ) -> None:
        """`truncate: follow`: the TRUNCATE becomes a statement of the table's transaction
        for this batch (``program.truncate_records``; with ``target.atomic`` the batch's one
        transaction). A merged table's rows go (a soft-deleting table marks them) before its
        MERGE, which brings only the changes after the TRUNCATE (``_cut``); a changelog /
        scd2 table records it after its changes, which are all kept. Nothing runs here: a
        replay of a committed batch is skipped by its state row, and one not committed was
        rolled back whole, the TRUNCATE with it. ``source``: a routed target's truncated
        table, whose rows and changes alone are concerned."""

        sequence, pos = row_position(row)
        self._truncates.setdefault(table.target_parts, []).append(TruncateAt(
            str(row["file"]), sequence, pos, int(row.get("ts_ms") or 0),
            cb.change_seq_at(sequence, pos), source))
        if table.mode == "merge":
            self._cut[(source or table.source_name).lower()] = (sequence, pos)
            what = ("target rows marked deleted" if table.deletes == "soft"
                    else "target rows deleted")
            what = what.replace("target rows", f"target rows of {source}") if source else what
            what += " before the batch's MERGE of the changes after it"
        else:
            # Not cut from the batch: the history keeps the changes before it.
            what = ("the versions current at it end there" if table.mode == "scd2"
                    else "a delete recorded per key live before it")
        self._notice(f"{source or table.source_name}: TRUNCATE followed: {what}, in the "
                     "batch's transaction")

    def _rename_columns(self, old_plan: Plan) -> None:
        """Followed column renames, before the re-plan (whose setup would otherwise add the
        new name as an empty column): the target column keeps its data under the new name.
        Only where the target still has the old name and not the new one (a replayed batch)."""

        for name, decisions in self._evolving.items():
            table = next(t for t in old_plan.tables if not t.routed and t.reads(name))
            for decision in decisions:
                for step in decision.following(ChangeKind.RENAME_COLUMN):
                    old = next((c.target_column for c in table.columns if c.source_column
                                and c.source_column.lower() == (step.change.column or "").lower()
                                and c.expression is None), None)
                    if old is None:
                        continue
                    new = renamed_target(self.pipeline, table, step.change.new_name or "")
                    if rename_target_column(self.sink, table, old, new):
                        self._notice(f"{name}: target column {old} renamed to {new}")

    def _alter_columns(self, old_plan: Plan) -> None:
        """After the re-plan (whose setup already added, widened and relaxed what the target
        lacks: ``program.column_changes``), per table whose columns a followed DDL changed:
        stop on a type change the policy or the target does not take, and apply `drop_column`
        to the planned columns that are gone. Planned types are compared, not the DDL's text,
        so the pt-osc / gh-ost swap (whose RENAME says nothing about columns) is judged the
        same way. Statements run only where still needed."""

        dialect = self.sink.dialect
        for name, decisions in self._evolving.items():
            old = next(t for t in old_plan.tables if not t.routed and t.reads(name))
            new = next(t for t in self.plan.tables if t.target_parts == old.target_parts)
            renamed = {(s.change.column or "").lower() for d in decisions
                       for s in d.following(ChangeKind.RENAME_COLUMN)}
            have = self.sink.existing_columns(new)
            work: list[Statement] = []
            retyped: list[PlannedColumn] = []
            new_columns = {c.target_column: c for c in new.columns}
            for column in old.columns:
                if column.role != "data" or column.expression is not None:
                    continue
                after = new_columns.get(column.target_column)
                if after is None:
                    if (column.source_column or "").lower() in renamed:
                        continue
                    action = policy_for(self.pipeline, name).drop_column
                    if action == "stop":
                        raise stop_error([name], "this batch", Step(ColumnChange(
                            ChangeKind.DROP_COLUMN, f"drops column {column.source_column}"),
                            "stop", f"drops column {column.source_column}"), "")
                    if column.target_column.lower() not in have:
                        continue
                    if action == "follow":
                        work.append(Statement("follow a dropped column", ddl.drop_column(
                            new, column.target_column, dialect)))
                    # ignore: the re-plan's setup relaxed its NOT NULL (program.column_changes)
                    continue
                if after.target_type == column.target_type or after.declared_type:
                    continue
                what = (f"changes column {column.source_column}: {column.target_column} "
                        f"{column.target_type.describe()} -> {after.target_type.describe()}")
                if not widens(column.target_type, after.target_type):
                    step = retype_step(ColumnChange(ChangeKind.TYPE_CHANGE, what),
                                       policy_for(self.pipeline, name).type_change, new, after,
                                       what)
                    if step.action == "stop":
                        raise stop_error([name], "this batch", step, "")
                    retyped.append(after)
                    continue
                if policy_for(self.pipeline, name).widen_type != "follow":
                    raise stop_error([name], "this batch", Step(ColumnChange(
                        ChangeKind.TYPE_CHANGE, what), "stop", what), "")
                # follow: the re-plan's setup widened it (program.column_changes)
            self.sink.execute(new, work)
            for statement in work:
                self._notice(f"{name}: {statement.purpose}: {statement.sql}")
            if retyped:
                self._retype(name, new, retyped)

    def retype_lagging_columns(self) -> None:
        """At start-up: a target column that cannot hold the plan's values
        (``plan.types.lags_plan``: the column's type changed in MySQL while no run
        followed it, or a run stopped inside that DDL's batch; the plan is built from the
        live catalog, so the DDL's batch finds nothing left to change) goes the way of the
        table's `type_change` policy, as the DDL's batch would have sent it."""

        dialect = self.sink.dialect
        for table in self.plan.tables:
            if table.routed or table.outbox is not None:
                continue
            described = self.sink.described_columns(table)
            retyped = []
            for column in table.columns:
                # None: the driver does not describe its type (Snowflake's: not a number)
                have = described.get(column.target_column.lower())
                # A type declared in the YAML is the user's: a change of it applies to the
                # rows written from then on (docs/guarantees.md), as it always did.
                if (column.role != "data" or column.source_column is None
                        or column.target_column.lower() not in described
                        or column.declared_type
                        or not lags_plan(have, column.target_type, dialect)):
                    continue
                what = (f"column {column.source_column} changed type while no run followed it: "
                        f"target column {column.target_column} is {have or 'not a number'}, "
                        f"the plan's {column.target_type.describe()}")
                step = retype_step(ColumnChange(ChangeKind.TYPE_CHANGE, what),
                                   policy_for(self.pipeline, table.source_name).type_change,
                                   table, column, what)
                if step.action == "stop":
                    raise stop_error([table.source_name], "start-up", step, "")
                retyped.append(column)
            if retyped:
                self._retype(table.source_name.lower(), table, retyped)
                # Its changes before now are the copy's (it reads every row after this): the
                # batches replaying them, its DDL's among them, leave them out, so no file
                # in the old type is read (pyarrow cannot unify it with the new one).
                self._copied_from[table.source_name.lower()] = last_before(
                    current_position(self.pipeline.source))

    def _retype(self, name: str, table: TablePlan, columns: list[PlannedColumn]) -> None:
        """`type_change: recopy`: the table's copy is queued afresh and saved (the runner's
        ``on_recopy``) before anything changes, so a crash from here on still copies it; then
        the target columns are re-created in their new type (NULL until the copy rewrites each
        row), and this batch's changes of the table before its DDL are dropped: the copy
        reads every row as it is now, and an old value may not convert to the new type."""

        if self._on_recopy is None:
            raise EngineError(f"{name}: a type change needs the table copied again, and this "
                              "applier cannot queue a copy",
                              hint="run the pipeline with `replicator run`")
        self._on_recopy(table.source_name, None)
        work = retype_columns(table, columns, self.sink.dialect)
        self.sink.execute(table, work)
        at = self._ddl_at.get(name)
        if at is not None:
            self._cut[name] = max(self._cut.get(name, at), at)
        self._notice(f"{name}: column(s) {', '.join(c.target_column for c in columns)} "
                     "re-created in the new type; copying the table again chunk by chunk "
                     "between stream batches")

    def _notice(self, message: str) -> None:
        if self._on_notice:
            self._on_notice(message)

    def rekey(self, tables: Sequence[str]) -> None:
        """After ``KeyChanged`` (the runner then streams on, the decoders taking the new key):
        the tables' copies are queued afresh and saved, their plans rebuilt from the live
        catalog (a DuckDB target is rebuilt under the new key by the setup, ``program.
        key_changes``), and their changes before the source's head, read before the catalog
        so that every DDL up to it is in the plan, are left to the copies."""
        head = current_position(self.pipeline.source)
        if self._on_recopy is None:
            raise EngineError(f"{', '.join(tables)}: a key change needs the table copied again, "
                              "and this applier cannot queue a copy",
                              hint="run the pipeline with `replicator run`")
        for name in tables:
            self._on_recopy(name, None)
        self._evolve(handled={name.lower() for name in tables})
        for name in tables:
            self._copied_from[name.lower()] = last_before(head)
        self._notice(f"{', '.join(tables)}: primary key changed: streaming on with the new key "
                     "and copying the table again chunk by chunk between stream batches")

    def _evolve(self, created: Sequence[str] = (), handled: set[str] | None = None) -> None:
        """Re-read the catalog, rebuild the plan, let the sink ALTER the target.

        ``created``: the routed source tables this batch showed being born (a CREATE, or the
        first rows of a CREATE ... SELECT): the runner records them as covered. Other tables
        the live catalog adds to the plan are not: the binlog being applied has not reached
        their arrival yet, and a RENAME into the selection there must still copy them.
        """
        context = Context(self.pipeline)
        catalog = context.read_catalog()
        # A named table this batch's DDL did not touch keeps its plan, and is not even planned
        # again: the live catalog may already show DDL of it that lies ahead in the binlog (a
        # column dropped or renamed after this batch's end, which a binding entry of the YAML
        # still names), and that DDL's own batch follows it by its policy. (Stopping here, as
        # before, failed the schema-policies test on a loaded machine: issue 21; planning it
        # failed a masked column renamed behind another table's DDL: issue 29.)
        named = handled or set()
        new_plan = context.replan(catalog, named=named)
        # A column of a touched table the target lacks under `add_column: ignore` (renamed
        # from an ignored one, or added by DDL ahead in the binlog) stays out of the target.
        if handled and context.ignore_missing_columns(self.sink, new_plan, only=handled):
            new_plan = context.replan(catalog, named=named)
        fresh_plans = {table.target_parts: table for table in new_plan.tables}
        kept = []
        for old in self.plan.tables:
            # By target: the routes of an outbox all read one source table. Routed: a column
            # only a dropped (or renamed away) table had leaves the union: its target column
            # stays, NULL for new rows. Handled: the batch's DDL of the table changed its
            # columns; _alter_columns applies the policies.
            fresh = fresh_plans.pop(old.target_parts, None)
            if not old.routed and catalog.table(
                    old.source_database, old.source_table) is None:
                continue  # dropped in MySQL (`drop_table: ignore`): the plan leaves it out
            kept.append(fresh if fresh is not None and (old.routed or old.source_name.lower()
                                                         in named) else old)
        kept += fresh_plans.values()  # targets the re-plan adds (a selection's new shape)
        new_plan = dataclasses.replace(new_plan, tables=tuple(kept))
        self.replan(new_plan)
        fresh = list(dict.fromkeys(name for name in created if self._routed(name)))
        if fresh and self._on_new_sources is not None:
            self._on_new_sources(fresh)

    def replan(self, new_plan: Plan) -> None:
        """Apply with ``new_plan`` from now on; the sink ALTERs the target as it needs."""
        if self._open_sink is not None:
            on_retry = getattr(self.sink, "on_retry", None)
            self.sink.close()
            self.sink = self._open_sink(self.pipeline, new_plan)
            self.sink.on_retry = on_retry
        self.plan = new_plan
        self.sink.prepare()


def renamed_target(pipeline: Any, table: TablePlan, new_source: str) -> str:
    """The target column of a source column renamed to ``new_source``: the name the YAML
    gives it (a followed entry's `name:` stays), else the new source name."""
    spec = next((t for t in pipeline.tables if not t.routed and t.source_name.lower()
                 == table.source_name.lower()), None)
    mapping = spec.mapping_for(new_source) if spec is not None else None
    return target_identifier((mapping.target_column if mapping else None) or new_source,
                             table.identifier_case)


def rename_target_column(sink: Any, table: TablePlan, old: str, new: str) -> bool:
    """A followed column rename in the target and its log table, each only where it still
    has the old name and not the new one (a replayed batch, a start-up that did it first):
    the data stays under the new name. True when a statement ran."""
    renamed = False
    for log in ((False, True) if table.log_table else (False,)):
        have = sink.existing_columns(table, log=log)
        if old.lower() in have and new.lower() not in have:
            sink.execute(table, [Statement("follow a column rename", ddl.rename_column(
                table, old, new, sink.dialect, log=log))])
            renamed = True
    return renamed

def stop_on_unfollowed_widening(pipeline: Any, plan: Plan, sink: Any) -> None:
    """At start-up, before the sink's setup widens them in place: a target column narrower
    than the plan's (``plan.types.widened_from``: its type was widened in MySQL while no run
    followed it, so the plan already has the new type and the DDL's batch finds nothing to
    change) of a table under `widen_type: stop` stops the run, as the DDL's batch would
    have."""
    for table in plan.tables:
        if table.routed or table.outbox is not None \
                or policy_for(pipeline, table.source_name).widen_type != "stop":
            continue
        described = sink.described_columns(table)
        for column in table.columns:
            have = described.get(column.target_column.lower())
            if (column.role != "data" or column.source_column is None or column.declared_type
                    or not have or not widened_from(have, column.target_type, sink.dialect)):
                continue
            what = (f"column {column.source_column} was widened while no run followed it: "
                    f"target column {column.target_column} is {have}, the plan's "
                    f"{column.target_type.describe()}")
            raise stop_error([table.source_name], "start-up", Step(ColumnChange(
                ChangeKind.TYPE_CHANGE, what), "stop", what, by_policy=True), "")


def _ddl_details(row: dict[str, Any]) -> dict[str, Any]:
    """A DDL row's {database, sql, kind, tables}: a manifest row's ``ddl``, or the JSON in
    a change row's ``after``."""
    return json.loads(row.get("ddl") or row["after"])


_COLUMN_KINDS = frozenset({"add_column", "widen_type", "rename_column", "drop_column",
                           "rename_table"})
