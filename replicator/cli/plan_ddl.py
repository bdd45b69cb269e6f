"""``replicator plan PIPELINE.yaml --ddl "ALTER TABLE ..."``: what the pipeline would do on a DDL.

So a team can review a migration before running it. The statement is read by the very
functions ``run`` uses when the DDL arrives in the binlog (``source.ddl.schema_change`` for
the tables it touches, ``engine.schema_changes.classify`` for what it changes), and an added
column's target ALTER comes from re-planning with the column added, as ``run`` re-plans from
the catalog. Nothing is executed.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from replicator.errors import UsageError

if TYPE_CHECKING:
    from replicator.model.catalog import Catalog
    from replicator.model.pipeline import Pipeline
    from replicator.plan import Dialect, Plan, TablePlan


@dataclasses.dataclass
class DdlEffectOnTable:
    source: str  # db.table the DDL touches
    targets: list[str]  # the target tables reading it (empty: not replicated)
    action: str  # ignore | evolve | stop | not_replicated | follow
    what: str
    statements: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    hint: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def preview_ddl(pipeline: Pipeline, catalog: Catalog, plan: Plan, ddl: str,
                dialect: Dialect) -> list[DdlEffectOnTable]:
    """One effect per table the DDL touches."""
    from replicator.engine.schema_changes import DdlEffect, cannot_follow, classify
    from replicator.model.changes import BinlogPosition
    from replicator.source.ddl import schema_change

    change = schema_change(ddl, "", BinlogPosition("mysql-bin.000001", 4), 0)
    if change is None:
        raise UsageError(f"not a DDL statement: {ddl[:80]!r}",
                         hint="give the statement as it will run: ALTER/CREATE/DROP/RENAME/TRUNCATE")
    if not change.tables:
        raise UsageError(f"the statement names no table: {ddl[:80]!r}",
                         hint="--ddl previews table DDL, e.g. \"ALTER TABLE shop.orders ADD COLUMN x INT\"")
    intent = classify(ddl)
    effects = []
    for name in (_qualified(name, pipeline, plan) for name in change.tables):
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
        elif intent.effect is DdlEffect.ADD_COLUMNS:
            effects.append(_evolve_effect(pipeline, catalog, plan, name, readers, ddl, dialect))
        else:
            stop = cannot_follow([name], "its binlog position", intent, ddl)
            effects.append(DdlEffectOnTable(name, targets, "stop", stop.message, hint=stop.hint))
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


def _evolve_effect(pipeline: Pipeline, catalog: Catalog, plan: Plan, name: str,
                   readers: list[TablePlan], ddl: str, dialect: Dialect) -> DdlEffectOnTable:
    from replicator.engine.schema_changes import added_columns
    from replicator.model.catalog import Catalog, MySQLType, MySQLTypeError, SourceColumn
    from replicator.plan import build_plan
    from replicator.plan.statements import add_columns

    added = added_columns(ddl)
    database, table = name.split(".", 1)
    source = catalog.table(database, table)
    targets = [".".join(t.target_parts) for t in readers]
    if source is None:
        return DdlEffectOnTable(name, targets, "evolve", "adds columns (the table's columns are "
                                "not known here: run plan without --offline to see the ALTER)")
    columns = list(source.columns)
    for column in added:
        try:
            mysql_type = MySQLType.parse(column.mysql_type)
        except MySQLTypeError as exc:
            raise UsageError(f"{name}.{column.name}: {exc}",
                             hint="write the type as MySQL does: decimal(10,2)") from None
        columns.append(SourceColumn(column.name, mysql_type, True, len(columns) + 1))
    changed = dataclasses.replace(source, columns=tuple(columns))
    future = build_plan(pipeline, Catalog(tuple(changed if t is source else t
                                                for t in catalog.tables)))
    statements: list[str] = []
    new_names: list[str] = []
    for old in readers:
        new = next(t for t in future.tables if t.target_parts == old.target_parts)
        before = {c.target_column for c in old.columns}
        fresh = [c for c in new.columns if c.target_column not in before]
        new_names += [c.target_column for c in fresh]
        statements += add_columns(new, fresh, dialect)
        if new.log_table is not None:
            before_log = {c.target_column for c in old.log_columns}
            statements += add_columns(new, [c for c in new.log_columns
                                            if c.target_column not in before_log],
                                      dialect, log=True)
    notes = []
    defaults = [c for c in added if c.default is not None and c.default.upper() != "NULL"]
    if defaults:
        notes.append(
            "rows already in the target get NULL for "
            + ", ".join(f"{c.name} (MySQL shows DEFAULT {c.default})" for c in defaults)
            + " until they change; `replicator verify` reports them, and "
            "`replicator run PIPELINE.yaml --snapshot always` re-copies them")
    if not statements:
        return DdlEffectOnTable(name, targets, "evolve", "adds columns the pipeline does not "
                                "replicate (excluded or not selected): nothing changes", notes=notes)
    return DdlEffectOnTable(name, targets, "evolve",
                            f"adds {', '.join(new_names)}: followed in the batch that holds the "
                            "DDL; the target is altered", statements=statements, notes=notes)


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
