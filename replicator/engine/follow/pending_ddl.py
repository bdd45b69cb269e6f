"""DDL written while no run followed it: read at start-up, before the plan and the setup.

A run plans from the *live* catalog, and its setup (``sink.prepare``) makes the target match
that plan before the stream reaches the DDL between the checkpoint and the binlog head. What
the live catalog cannot tell is lost that way (issue 18): a renamed column would be added
empty under its new name (the data staying under the old one), a dropped column would be
left in the target whatever `drop_column` says (the plan no longer has it, so the DDL's
batch finds nothing to follow), and a dropped table fails the plan ("source tables not
found") instead of following `drop_table`.

So the run reads that range's DDL first (``pending_schema_changes``: Query events only, row
events skipped undecoded by ``read_changes(rows=False)``), judges each statement on the
replicated tables with the same ``intent.classify`` / ``schema_changes.decide`` as the DDL's
batch, and acts on it now: a policy's ``stop`` stops at start-up (``stop_on_pending_drops``
for DROP TABLE, before the plan; ``follow_pending_ddl`` for columns), a followed column
rename or drop runs the very statements the batch would (``follower.SchemaFollower``), each
only where the target still needs it, so the batch that later holds the DDL finds it done.

Widenings and other type changes are left to the checks that compare the target with the
plan (``follower.stop_on_unfollowed_widening``, ``retype_lagging_columns``); key changes,
TRUNCATE and RENAME TABLE to the DDL's batch, which the live plan does not mislead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from replicator.engine.follow.follower import rename_target_column, renamed_target
from replicator.engine.follow.intent import ChangeKind, DdlEffect, classify
from replicator.engine.follow.schema_changes import Decision, decide, stop_error
from replicator.errors import BinlogGoneError, SourceError
from replicator.model.changes import SchemaChange
from replicator.plan.identifiers import target_identifier
from replicator.plan.program import Statement
from replicator.plan.statements import ddl
from replicator.source.binlog import read_changes
from replicator.source.positions import binlog_head, ensure_available

if TYPE_CHECKING:
    from replicator.context import Context
    from replicator.engine.state.checkpoint import CheckpointDir
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan

WHERE = "start-up"


def pending_schema_changes(pipeline: Pipeline, checkpoint: CheckpointDir) -> list[SchemaChange]:
    """The DDL on the pipeline's named tables between the checkpoint's resume position and the
    binlog head, in binlog order ([] on a first run). Only Query events are parsed: the
    reader skips row events without decoding them (their bytes still cross the network)."""
    resume = checkpoint.resume_position()
    named = [t.source_name for t in pipeline.tables if not t.routed]
    if resume is None or not resume.file or not named:
        return []
    try:
        # A purged binlog or another server's position: the run's own checks report it
        # (or follow the GTID to the new server) after the start is resolved.
        ensure_available(pipeline.source, resume)
    except (BinlogGoneError, SourceError):
        return []
    head = binlog_head(pipeline.source)
    if resume >= head:
        return []
    return [change for change in read_changes(pipeline.source, start=resume, end=head,
                                              tables=named, server_id=pipeline.server_id,
                                              rows=False)
            if isinstance(change, SchemaChange)]


def _replicated(pipeline: Pipeline, change: SchemaChange) -> list[str]:
    """The pipeline's named (not routed) source tables ``change`` names, as the YAML names them."""
    named = {t.source_name.lower(): t.source_name for t in pipeline.tables if not t.routed}
    return list(dict.fromkeys(named[t.lower()] for t in change.tables if t.lower() in named))


def _decisions(pipeline: Pipeline, pending: Sequence[SchemaChange],
               kinds: frozenset[str]) -> list[tuple[SchemaChange, str, Decision]]:
    """(change, table, decision) of each pending DDL of ``kinds`` on a named table. Decided
    by policy alone (no table plan): the plan of the columns before the DDL is gone, and the
    live one would call a renamed or dropped column "not replicated"; the target tells which
    columns were replicated (``follow_pending_ddl``)."""
    decided = []
    for change in pending:
        if change.kind not in kinds:
            continue
        intent = classify(change.sql)
        if intent.effect is DdlEffect.NOTHING:
            continue
        for name in _replicated(pipeline, change):
            decided.append((change, name, decide(intent, pipeline, name, None)))
    return decided


def stop_on_pending_drops(pipeline: Pipeline, pending: Sequence[SchemaChange]) -> None:
    """Before the plan (which a dropped table fails): a DROP TABLE of a named table under
    `drop_table: stop` stops the run, as the DDL's batch would have."""
    for change, name, decision in _decisions(pipeline, pending, frozenset({"drop"})):
        stop = decision.stop
        if stop is not None and stop.change.kind is ChangeKind.DROP_TABLE:
            raise stop_error([name], f"{WHERE} (written while no run followed it, at "
                             f"{change.position})", stop, change.sql)


def follow_pending_columns(context: Context, pending: Sequence[SchemaChange]) -> None:
    """Before the plan: the renames and drops of columns the YAML names, in the pending range,
    recorded as the DDL's batch would (``SchemaFollower._follow_declared_columns``), so the plan
    applies each entry's settings to its column under its new name instead of failing on the
    old one. Each DDL is decided against the pipeline as the ones before it left it. A stop
    that is not the policy's own (a rename onto another configured column's name, an
    expression naming the column) stops here, with its exact edit."""
    for change in pending:
        if change.kind != "alter":
            continue
        intent = classify(change.sql)
        if intent.effect is DdlEffect.NOTHING:
            continue
        for name in _replicated(context.pipeline, change):
            decision = decide(intent, context.pipeline, name, None)
            for step in decision.steps:
                kind = step.change.kind
                if kind not in (ChangeKind.RENAME_COLUMN, ChangeKind.DROP_COLUMN):
                    continue
                if step.action == "stop":
                    if not step.by_policy:
                        raise stop_error([name], f"{WHERE} (written while no run followed it, "
                                         f"at {change.position})", step, change.sql)
                    continue  # the policy's stop: follow_pending_ddl judges it by the target
                context.follow_column(name, step.change.column or "",
                                      step.change.new_name if kind is ChangeKind.RENAME_COLUMN
                                      else None)


def follow_pending_ddl(pipeline: Pipeline, plan: Plan, sink: Any, pending: Sequence[SchemaChange],
                       notice: Callable[[str], None]) -> dict[str, dict[str, str]]:
    """Before the setup: column DDL of the pending range, in binlog order, by its policy.

    Only columns the target has are judged (the target holds the columns as replicated
    before the DDL): `stop` of an added, renamed or dropped column stops the run; a followed
    rename renames the target column (and its log table's), a followed drop drops it; each
    statement runs only where the target still needs it, so a batch replayed over the same
    DDL, or a later start-up, changes nothing.

    Returns the followed renames, db.table (lower) -> {new source column: old}: the batch
    applier's ``renamed_columns``, so rows landed before the RENAME (whose batch now decides
    "nothing": the live plan has only the new name) keep their value under the new name."""
    renamed: dict[str, dict[str, str]] = {}
    for change, name, decision in _decisions(pipeline, pending, frozenset({"alter"})):
        table = next((t for t in plan.tables if not t.routed and t.reads(name)), None)
        if table is None:
            continue
        have = set(sink.described_columns(table))
        if not have:
            continue  # not created yet: the setup creates it as the live catalog has it
        for step in decision.steps:
            kind = step.change.kind
            if kind not in (ChangeKind.ADD_COLUMN, ChangeKind.RENAME_COLUMN,
                            ChangeKind.DROP_COLUMN):
                continue
            column = target_identifier(step.change.column or "", table.identifier_case)
            if (column.lower() in have) == (kind is ChangeKind.ADD_COLUMN):
                continue  # an added column the target has, a column it does not replicate
            if step.action == "stop":
                raise stop_error([name], f"{WHERE} (written while no run followed it, at "
                                 f"{change.position})", step, change.sql)
            if step.action != "follow" or kind is ChangeKind.ADD_COLUMN:
                continue  # ignore; an added column: the setup adds it
            if kind is ChangeKind.RENAME_COLUMN:
                new = renamed_target(pipeline, table, step.change.new_name or "")
                if new.lower() not in have:
                    rename_target_column(sink, table, column, new)
                    notice(f"{name}: target column {column} renamed to {new} (renamed while "
                           "no run followed it)")
                    have = (have - {column.lower()}) | {new.lower()}
                renamed.setdefault(name.lower(), {})[step.change.new_name or ""] = \
                    step.change.column or ""
            else:
                sink.execute(table, [Statement("follow a dropped column",
                                               ddl.drop_column(table, column, sink.dialect))])
                have.discard(column.lower())
                notice(f"{name}: target column {column} dropped (column dropped at "
                       f"{change.position} while no run followed it; drop_column: follow)")
    return renamed

