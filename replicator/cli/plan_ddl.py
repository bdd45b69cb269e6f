"""``replicator plan PIPELINE.yaml --ddl "ALTER TABLE ..."``: what the pipeline would do on a DDL.

So a team can review a migration before running it. The statement is read by the very
functions ``run`` uses when the DDL arrives in the binlog (``source.ddl.schema_change`` for
the tables it touches, ``engine.follow.intent.classify`` for what it changes), and an added
column's target ALTER comes from re-planning with the column added, as ``run`` re-plans from
the catalog. Nothing is executed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from replicator.engine.follow.intent import ChangeKind, DdlEffect, added_columns, classify
from replicator.engine.follow.schema_changes import Decision, decide, stop_error
from replicator.errors import UsageError
from replicator.model.catalog import Catalog, MySQLType, MySQLTypeError, SourceColumn
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import Pipeline
from replicator.plan import Dialect, Plan, TablePlan, build_plan
from replicator.plan.identifiers import target_identifier
from replicator.plan.program import TruncateAt, key_changes, retype_columns, truncate_records
from replicator.plan.statements.ddl import (
    add_columns,
    alter_column_type,
    default_literal,
    drop_column,
    drop_not_null,
    rename_column,
)
from replicator.plan.statements.tables import create_staging_table, primary_key
from replicator.source.ddl import schema_change


@dataclasses.dataclass
class DdlEffectOnTable:
    source: str  # db.table the DDL touches
    targets: list[str]  # the target tables reading it (empty: not replicated)
    action: str  # follow | recopy | ignore | stop | not_replicated
    what: str
    statements: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def preview_ddl(pipeline: Pipeline, catalog: Catalog, plan: Plan, ddl: str,
                dialect: Dialect) -> list[DdlEffectOnTable]:
    """One effect per table the DDL touches."""
    change = schema_change(ddl, "", BinlogPosition("mysql-bin.000001", 4), 0)
    if change is None:
        raise UsageError(f"not a DDL statement: {ddl[:80]!r}",
                         hint="give the statement as it will run: ALTER/CREATE/DROP/RENAME/TRUNCATE")
    if not change.tables:
        raise UsageError(f"the statement names no table: {ddl[:80]!r}",
                         hint="--ddl previews table DDL, e.g. \"ALTER TABLE shop.orders ADD COLUMN x INT\"")
    intent = classify(ddl)
    effects = []
    for name in dict.fromkeys(_qualified(name, pipeline, plan) for name in change.tables):
        readers = [t for t in plan.tables if t.reads(name)]
        targets = [".".join(t.target_parts) for t in readers]
        if not readers:
            effects.append(DdlEffectOnTable(name, [], "not_replicated",
                                            "not replicated by this pipeline: ignored"))
            continue
        routed = all(t.routed for t in readers)
        if routed and change.kind in ("create", "rename", "drop"):
            effects.append(_routed_effect(name, targets, change.kind, change.tables))
            continue
        if intent.effect is DdlEffect.NOTHING:
            effects.append(DdlEffectOnTable(name, targets, "ignore",
                                            f"{intent.what}: changes nothing replicated; logged, "
                                            "the pipeline streams on"))
            continue
        decision = decide(intent, pipeline, name, readers[0],
                          renamed_onto=name.lower() in {t.lower() for t in change.tables[1::2]})
        stop = decision.stop
        if stop is not None:
            error = stop_error([name], "its binlog position", stop, ddl)
            effects.append(DdlEffectOnTable(name, targets, "stop", error.message, hint=error.hint))
            continue
        effects.append(_follow_effect(pipeline, catalog, plan, name, readers, ddl, dialect,
                                      decision))
    return effects


def _qualified(name: str, pipeline: Pipeline, plan: Plan) -> str:
    """``.orders`` (an unqualified name) -> the one replicated ``db.orders``."""
    if not name.startswith("."):
        return name
    table = name[1:].lower()
    found = sorted({source for t in plan.tables for source in t.source_names
                    if source.split(".", 1)[1].lower() == table})
    if len(found) == 1:
        return found[0]
    raise UsageError(
        f"the statement names table {table!r} without its database"
        + (f", and {len(found)} replicated tables have that name" if found else ""),
        hint="qualify it as it will run in the binlog's session: ALTER TABLE shop.orders ...",
    )


def _routed_effect(name: str, targets: list[str], kind: str,
                   tables: tuple[str, ...]) -> DdlEffectOnTable:
    if kind == "create":
        return DdlEffectOnTable(name, targets, "follow", "a new table the `sources:` selection "
                                "matches: planned and streamed from its CREATE, no copy")
    if kind == "drop":
        return DdlEffectOnTable(name, targets, "follow", "stops being read; its rows stay in the "
                                "target (docs/routing.md gives the DELETE)")
    arriving = name in tables[1::2]
    return DdlEffectOnTable(
        name, targets, "follow",
        "renamed into the `sources:` selection: its rows were written under another name, so "
        "the running pipeline copies it, then streams on" if arriving else
        "renamed away from the selection: stops being read; its rows stay in the target")


def _follow_effect(pipeline: Pipeline, catalog: Catalog, plan: Plan, name: str,
                   readers: list[TablePlan], ddl: str, dialect: Dialect,
                   decision: Decision) -> DdlEffectOnTable:
    """The target statements ``run`` executes for a DDL it follows (``BatchApplier`` runs the
    same functions), and a note per change it ignores."""
    targets = [".".join(t.target_parts) for t in readers]
    statements: list[str] = []
    notes: list[str] = []
    done: list[str] = []
    retyped: list[str] = []
    ignored = [step.change.column or "" for step in decision.steps
               if step.change.kind is ChangeKind.ADD_COLUMN and step.action == "ignore"]
    notes += _unfollowed_notes(decision)
    widened: list[str] = []
    retyped_tables: list[tuple[TablePlan, dict[str, Any]]] = []
    rekeyed: set[tuple[str, ...]] = set()
    for table in readers:
        new_types = {}
        for step in decision.following(ChangeKind.TYPE_CHANGE):
            widened.append(alter_column_type(table, step.target_column, step.target_type,
                                             dialect))
            new_types[step.target_column] = step.target_type
            done.append(step.why)
        for step in decision.recopying:
            if step.change.kind is ChangeKind.RENAME_TABLE:
                done.append(f"{step.why}; the copy runs chunk by chunk between stream batches "
                            "(the other tables stream on), its new columns follow the column "
                            "policies")
                continue
            if step.change.kind is ChangeKind.KEY_CHANGE:
                done.append(step.why)
                if table.target_parts not in rekeyed:  # DROP and ADD PRIMARY KEY: one change
                    rekeyed.add(table.target_parts)
                    sql, note = _rekey_statements(pipeline, catalog, name, table, ddl, dialect)
                    statements += sql
                    notes += [note] if note else []
                continue
            column = next(c for c in table.columns if c.target_column == step.target_column)
            retyped += [statement.sql for statement in retype_columns(
                table, [dataclasses.replace(column, target_type=step.target_type)], dialect)]
            new_types[step.target_column] = step.target_type
            done.append(f"{step.why}: its changes before the DDL are left to the copy, which "
                        "runs chunk by chunk between stream batches (the other tables stream on)")
        if new_types and not dialect.staging_per_batch:
            retyped_tables.append((table, new_types))
        _column_statements(table, decision, dialect, statements, done)
        if decision.following(ChangeKind.TRUNCATE):
            _truncate_statements(table, dialect, statements, done, name)
        for _ in decision.following(ChangeKind.RENAME_TABLE):
            done.append("a table renamed onto the replicated name (the pt-osc / gh-ost swap) is "
                        "read on under it; its new columns follow the column policies")
    future: dict[tuple[str, ...], TablePlan] = {}
    if decision.following(ChangeKind.ADD_COLUMN):
        added = _added_effect(pipeline, catalog, plan, name, readers, ddl, dialect, future)
        statements += added.statements
        notes += added.notes
        done.insert(0, added.what)
    statements += widened  # by the re-plan's setup after its ADD COLUMNs (column_changes)
    for table, new_types in retyped_tables:
        # A staging table that outlives batches (Snowflake's) is re-created in the new types
        # by the re-plan's setup too, last (``program.column_changes``), before the columns
        # are re-created, as the run does.
        table = future.get(table.target_parts, table)
        statements.append(create_staging_table(dataclasses.replace(table, columns=tuple(
            dataclasses.replace(c, target_type=new_types[c.target_column])
            if c.target_column in new_types else c for c in table.columns)), dialect,
            replace=True))
    statements += retyped  # after the re-plan's ADD COLUMNs, as the run does (_alter_columns)
    if ignored:
        done.append(f"adds {', '.join(ignored)}: ignored (`schema_changes.add_column: ignore`): "
                    "not added to the target and not replicated; the other columns stream on")
    action = "recopy" if decision.recopying else "follow"
    if ignored and not statements and all(step.action in ("ignore", "nothing")
                                          for step in decision.steps):
        action = "ignore"
    return DdlEffectOnTable(name, targets, action,
                            "; ".join(done) or "nothing in the target changes",
                            statements=statements, notes=notes)


def _unfollowed_notes(decision: Decision) -> list[str]:
    """A note per change the policy ignores or that changes nothing replicated (an ignored
    added column is said once, with the statements)."""
    notes = []
    for step in decision.steps:
        if step.change.kind is ChangeKind.ADD_COLUMN and step.action == "ignore":
            continue
        if step.action in ("ignore", "nothing"):
            notes.append(f"{step.why}: {'ignored (policy)' if step.action == 'ignore' else 'no change'}"
                         + (": the target column stays, NULL for rows written from now on"
                            if step.change.kind is ChangeKind.DROP_COLUMN else ""))
    return notes


def _column_statements(table: TablePlan, decision: Decision, dialect: Dialect,
                       statements: list[str], done: list[str]) -> None:
    """Followed column renames and drops, and the NOT NULL a kept dropped column loses."""
    for step in decision.following(ChangeKind.RENAME_COLUMN):
        old = _target_of(table, step.change.column)
        if old is None:
            continue
        new = target_identifier(step.change.new_name or "", table.identifier_case)
        statements.append(rename_column(table, old, new, dialect))
        if table.log_table is not None:
            statements.append(rename_column(table, old, new, dialect, log=True))
        done.append(f"renames {old} to {new}")
    for step in decision.following(ChangeKind.DROP_COLUMN):
        old = _target_of(table, step.change.column)
        if old is not None:
            statements.append(drop_column(table, old, dialect))
            done.append(f"drops {old} from the target")
    for step in decision.steps:
        if step.change.kind is ChangeKind.DROP_COLUMN and step.action == "ignore":
            column = next((c for c in table.columns if c.target_column
                           == _target_of(table, step.change.column)), None)
            if column is not None and not column.nullable:
                statements.append(drop_not_null(table, column.target_column, dialect))


def _truncate_statements(table: TablePlan, dialect: Dialect, statements: list[str],
                         done: list[str], name: str) -> None:
    """A followed TRUNCATE: the very statements the batch runs (their ? bind its position and
    time, which this one, at the start of a binlog, stands for; a routed target's, the
    truncated table's name)."""
    somewhere = TruncateAt("mysql-bin.000001", 1, 4, 0, "", name if table.routed else None)
    statements += [s.sql for s in truncate_records(table, dialect, [somewhere])]
    if table.mode != "merge":
        done.append("records the TRUNCATE in the transaction of the batch that holds "
                    "it, after the batch's changes (those before it count, those after "
                    "it follow it): "
                    + ("every version current at it ends at its commit time, and a "
                       "key the batch inserts again after it opens a new version"
                       if table.mode == "scd2" else
                       "a delete row per key live before it, at its position")
                    + " (the ? are its position and commit time)")
        return
    done.append(("marks the target rows deleted" if table.deletes == "soft"
                 else "deletes the target rows")
                + " in the transaction of the batch that holds it (with "
                "`target.atomic` the batch's one transaction), before its MERGE of "
                "the changes after the TRUNCATE; the changes before it are dropped"
                + ("; the log table gets no row for the TRUNCATE, nor the "
                   "batch's changes before it" if table.log_table else ""))


def _rekey_statements(pipeline: Pipeline, catalog: Catalog, name: str, table: TablePlan,
                      ddl: str, dialect: Dialect) -> tuple[list[str], str | None]:
    """What the re-plan's setup runs for a changed primary key (``program.key_changes``, the
    table planned under the key the DDL adds), and a note where it cannot be known here."""
    import sqlglot
    from sqlglot import exp

    database, source_table = name.split(".", 1)
    source = catalog.table(database, source_table)
    try:
        added = [pk for pk in sqlglot.parse_one(ddl, read="mysql").find_all(exp.PrimaryKey)]
    except sqlglot.errors.ParseError:
        added = []
    if source is None or len(added) != 1:
        return [], ("the target's key statements are not known here (the table's columns or "
                    "the new key): run plan without --offline, with the whole ALTER")
    key = tuple(column.name for column in added[0].expressions)
    changed = dataclasses.replace(source, primary_key=key)
    future = build_plan(pipeline, Catalog(tuple(changed if t is source else t
                                                for t in catalog.tables)))
    new = next(t for t in future.tables if t.target_parts == table.target_parts)
    return [statement.sql for statement in key_changes(new, dialect, primary_key(table))], None


def _target_of(table: TablePlan, source_column: str | None) -> str | None:
    wanted = (source_column or "").lower()
    return next((c.target_column for c in table.columns
                 if c.source_column and c.source_column.lower() == wanted
                 and c.expression is None), None)


def _added_effect(pipeline: Pipeline, catalog: Catalog, plan: Plan, name: str,
                  readers: list[TablePlan], ddl: str, dialect: Dialect,
                  future_tables: dict[tuple[str, ...], TablePlan] | None = None
                  ) -> DdlEffectOnTable:
    """``future_tables``: filled with each reader's plan after the DDL, by target."""
    added = added_columns(ddl)
    database, table = name.split(".", 1)
    source = catalog.table(database, table)
    targets = [".".join(t.target_parts) for t in readers]
    if source is None:
        return DdlEffectOnTable(name, targets, "follow", "adds columns (the table's columns are "
                                "not known here: run plan without --offline to see the ALTER)")
    columns = list(source.columns)
    for column in added:
        try:
            mysql_type = MySQLType.parse(column.mysql_type)
        except MySQLTypeError as exc:
            raise UsageError(f"{name}.{column.name}: {exc}",
                             hint="write the type as MySQL does: decimal(10,2)") from None
        columns.append(SourceColumn(column.name, mysql_type, True, len(columns) + 1,
                                    default=column.default))
    changed = dataclasses.replace(source, columns=tuple(columns))
    future = build_plan(pipeline, Catalog(tuple(changed if t is source else t
                                                for t in catalog.tables)))
    statements: list[str] = []
    new_names: list[str] = []
    missed: list[str] = []
    for old in readers:
        new = next(t for t in future.tables if t.target_parts == old.target_parts)
        if future_tables is not None:
            future_tables[new.target_parts] = new
        before = {c.target_column for c in old.columns}
        fresh = [c for c in new.columns if c.target_column not in before]
        new_names += [c.target_column for c in fresh]
        missed += [c.target_column for c in fresh if c.source_default is not None
                   and c.source_default.upper() != "NULL" and default_literal(c, dialect) is None]
        statements += add_columns(new, fresh, dialect)
        if new.log_table is not None:
            before_log = {c.target_column for c in old.log_columns}
            statements += add_columns(new, [c for c in new.log_columns
                                            if c.target_column not in before_log],
                                      dialect, log=True)
    notes = []
    if missed:
        notes.append(
            "rows already in the target get NULL for " + ", ".join(missed)
            + ": its DEFAULT is not a constant the target can take; `replicator verify` "
            "reports them, and `replicator run PIPELINE.yaml --snapshot always` re-copies them")
    if not statements:
        return DdlEffectOnTable(name, targets, "follow", "adds columns the pipeline does not "
                                "replicate (excluded or not selected): nothing changes", notes=notes)
    return DdlEffectOnTable(name, targets, "follow",
                            f"adds {', '.join(new_names)}: followed in the batch that holds the "
                            "DDL; the target is altered, rows already there get the column's "
                            "DEFAULT", statements=statements, notes=notes)


def render_effects(ddl: str, effects: list[DdlEffectOnTable]) -> str:
    """The preview as SQL with comments (``plan``'s sql format)."""
    lines = [f"-- DDL: {' '.join(ddl.split())}"]
    for effect in effects:
        arrow = f" -> {', '.join(effect.targets)}" if effect.targets else ""
        lines.append(f"-- {effect.source}{arrow}: {effect.action.upper()}: {effect.what}")
        lines += [f"--   hint: {effect.hint}"] if effect.hint else []
        lines += [f"--   note: {note}" for note in effect.notes]
        lines += [f"{sql};" for sql in effect.statements]
    return "\n".join(lines)
