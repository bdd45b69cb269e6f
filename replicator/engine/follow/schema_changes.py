"""What the pipeline does about a DDL on a replicated table: its ``schema_changes:`` policy.

``engine.follow.intent.classify`` says what a statement changes (``ColumnChange``s);
``decide`` then says, change by change, what the pipeline does about it: follow, ignore,
nothing, re-copy or stop, by the table's policy and its plan. ``plan --ddl`` and the run's
applier both call it, so the preview is what the run does. What a followed change does to a
batch's rows (an added column's DEFAULT, a TRUNCATE's cut) is ``engine.follow.ddl_rows``.
"""


from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replicator.engine.follow.intent import ChangeKind, ColumnChange, DdlIntent
from replicator.errors import EngineError, ReplicatorError
from replicator.model.catalog import MySQLType, MySQLTypeError
from replicator.model.followed import rename_conflict
from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.parsing import referenced_columns
from replicator.plan.types import map_mysql_type


def cannot_follow(tables: Sequence[str], where: str, intent: DdlIntent, sql: str) -> EngineError:
    """The stop for DDL the engine does not follow (``run`` raises it; ``plan --ddl`` shows it)."""
    return EngineError(
        f"schema change on {', '.join(tables)} at {where} cannot be followed automatically "
        f"({intent.what}): {sql[:200]}",
        hint="added columns are followed; for anything else update the pipeline YAML if needed, "
        "then re-copy the table with `replicator run PIPELINE.yaml --snapshot always`",
    )


def stop_error(tables: Sequence[str], where: str, step: Step, sql: str) -> EngineError:
    """The stop for a change the table's policy (or the engine) does not follow (``run``
    raises it; ``plan --ddl`` shows it)."""
    kind = step.policy or step.change.kind.value
    others = [a for a in POLICY_CHOICES.get(kind, ()) if a != "stop"]
    if step.action == "stop" and others and step.by_policy:
        hint = (f"the pipeline's `schema_changes.{kind}` is stop; "
                + " or ".join(f"`{kind}: {a}`" for a in others)
                + " (pipeline-wide, or under the table) would go on; or re-copy the table: "
                "`replicator run PIPELINE.yaml --snapshot always`")
    else:
        hint = ("update the pipeline YAML if needed, then re-copy the table: "
                "`replicator run PIPELINE.yaml --snapshot always`")
    return EngineError(f"schema change on {', '.join(tables)} at {where} stops the pipeline "
                       f"({step.why})" + (f": {sql[:200]}" if sql else ""), hint=hint)


# The actions each kind allows (the JSON Schema's enums say the same; a unit test holds them
# together). The defaults are ``model.pipeline.SchemaChangePolicy``'s.
POLICY_CHOICES: dict[str, tuple[str, ...]] = {
    "add_column": ("follow", "ignore", "stop"),
    "widen_type": ("follow", "stop"),
    "type_change": ("recopy", "stop"),
    "rename_column": ("follow", "stop"),
    "drop_column": ("ignore", "follow", "stop"),
    "key_change": ("recopy", "stop", "ignore"),
    "truncate": ("follow", "ignore", "stop"),
    "rename_table": ("follow", "recopy", "stop"),
    "drop_table": ("ignore", "stop"),
}


@dataclass(frozen=True)
class Step:
    """What the pipeline does about one change: ``follow`` (the target changes), ``ignore``
    (logged; the target stays), ``nothing`` (nothing replicated changes), ``recopy`` (the
    table is copied again: after a type change with the target column re-created in its new
    type, after a key change with the new key, after a swap onto its name as is) or
    ``stop``."""

    change: ColumnChange
    action: str
    why: str
    # follow of a TYPE_CHANGE: the target column and its new type (TargetType)
    target_column: str | None = None
    target_type: Any = None
    # The `schema_changes:` key that decided it, where not the change's own kind
    # (``type_change`` for a type change that is not a widening), and whether the policy's
    # own choice is a stop (its hint then names the other choices).
    policy: str | None = None
    by_policy: bool = False


@dataclass(frozen=True)
class Decision:
    steps: tuple[Step, ...]

    @property
    def stop(self) -> Step | None:
        return next((step for step in self.steps if step.action == "stop"), None)

    def following(self, kind: ChangeKind) -> list[Step]:
        return [step for step in self.steps if step.action == "follow" and step.change.kind is kind]

    @property
    def recopying(self) -> list[Step]:
        return [step for step in self.steps if step.action == "recopy"]


def decide(intent: DdlIntent, pipeline: Any, source: str, table: Any, *,
           renamed_onto: bool = False) -> Decision:
    """The one place that decides what a DDL of a replicated table does to the pipeline.

    ``source``: the ``db.table`` the DDL touches; ``table``: the ``TablePlan`` reading it (the
    columns as planned before the DDL), or None when they are not known (``plan --ddl
    --offline`` on a table without declared columns): a type change is then judged by its
    policy alone. ``renamed_onto``: a RENAME TABLE names ``source`` as a new name (the swap of
    pt-online-schema-change and gh-ost), not only as an old one.
    """
    spec = _table_spec(pipeline, source)
    policy = pipeline.schema_changes_for(spec) if spec is not None else pipeline.schema_changes
    tinyint1 = pipeline.source.tinyint1
    return Decision(tuple(_step(change, policy, spec, table, tinyint1, renamed_onto, pipeline)
                          for change in intent.changes))


def policy_for(pipeline: Any, source: str) -> Any:
    """The `schema_changes:` policy of the table reading ``source`` (db.table)."""
    spec = _table_spec(pipeline, source)
    return pipeline.schema_changes_for(spec) if spec is not None else pipeline.schema_changes


def _table_spec(pipeline: Any, source: str) -> Any:
    """The YAML's table reading ``source``: named, else the `sources:` selection matching it."""
    wanted = source.lower()
    return next((t for t in pipeline.tables if not t.routed
                 and f"{t.source_database}.{t.source_table}".lower() == wanted),
                next((t for t in pipeline.tables if t.routed and t.selection is not None
                      and t.selection.matches(source)), None))


def _planned(table: Any, source_column: str | None) -> Any:
    if table is None or source_column is None:
        return None
    wanted = source_column.lower()
    return next((c for c in table.columns
                 if c.source_column and c.source_column.lower() == wanted and c.role == "data"
                 and c.expression is None), None)


# The kinds whose `follow` the run carries out (``engine.apply.applier.BatchApplier``); one the
# run did not carry out would stop rather than let `plan` promise it.
RUN_FOLLOWS = frozenset({ChangeKind.ADD_COLUMN, ChangeKind.TYPE_CHANGE, ChangeKind.RENAME_COLUMN,
                         ChangeKind.DROP_COLUMN, ChangeKind.RENAME_TABLE, ChangeKind.TRUNCATE})


def _step(change: ColumnChange, policy: Any, spec: Any, table: Any, tinyint1: str,
          renamed_onto: bool, pipeline: Any = None) -> Step:
    step = _policy_step(change, policy, spec, table, tinyint1, renamed_onto, pipeline)
    if step.action == "follow" and change.kind not in RUN_FOLLOWS:
        return Step(change, "stop", f"{step.why}: `run` does not follow this kind of change "
                    "yet")
    return step


def _policy_step(change: ColumnChange, policy: Any, spec: Any, table: Any, tinyint1: str,
                 renamed_onto: bool, pipeline: Any = None) -> Step:
    kind = change.kind
    if kind is ChangeKind.UNKNOWN:
        return Step(change, "stop", f"{change.what}: the engine cannot follow it")
    action = policy.action(kind.value)
    if kind is ChangeKind.RENAME_TABLE and action in ("follow", "recopy") and not renamed_onto:
        return Step(change, "stop", f"{change.what}: the replicated table is renamed away "
                    "without a table renamed onto its name")
    if kind is ChangeKind.RENAME_TABLE and action == "recopy":
        return _swap_recopy_step(change, table)
    if kind in (ChangeKind.RENAME_COLUMN, ChangeKind.DROP_COLUMN) and spec is not None \
            and action != "stop":
        named = _expressions_naming(spec, change.column or "")
        if named:
            return Step(change, "stop", f"{change.what}: {' and '.join(named)} of "
                        f"{spec.source_name} in the pipeline YAML name{'s' if len(named) == 1 else ''} "
                        f"{change.column}; edit "
                        + ("them" if len(named) > 1 else "it") + " to "
                        + (f"name {change.new_name} instead" if change.new_name
                           else f"no longer use {change.column}") + ", then run again")
    column = _planned(table, change.column)
    if kind in (ChangeKind.TYPE_CHANGE, ChangeKind.DROP_COLUMN, ChangeKind.RENAME_COLUMN) \
            and table is not None and column is None and not _is_key(table, change.column):
        return Step(change, "nothing", f"{change.what}: the column is not replicated")
    if kind is ChangeKind.TYPE_CHANGE:
        return _type_step(change, policy, table, column, tinyint1)
    if kind is ChangeKind.RENAME_COLUMN and action == "follow" and spec is not None:
        # The YAML's settings follow their column (``model.followed``): only a rename onto
        # the name of another configured column is ambiguous.
        conflict = _rename_conflict(pipeline, spec, change)
        if conflict is not None:
            return conflict
    if kind is ChangeKind.TRUNCATE and action == "follow" and table is not None \
            and (table.outbox is not None or not table.source_key):
        return Step(change, "stop", f"{change.what}: truncate: follow records a delete per "
                    "live key, and this table has " + ("its rows from outbox events"
                                                       if table.outbox is not None else "no key"))
    if kind is ChangeKind.KEY_CHANGE and action == "recopy":
        return _rekey_step(change, table)
    if kind is ChangeKind.KEY_CHANGE and action == "ignore" and table is not None \
            and table.key_origin != "declared":
        return Step(change, "stop", f"{change.what}: key_change: ignore needs the table's key "
                    "declared in the YAML")
    return Step(change, action, change.what, by_policy=action == "stop")


def _rename_conflict(pipeline: Any, spec: Any, change: ColumnChange) -> Step | None:
    """A stop for a rename onto the declared name of another binding entry (its column was
    dropped or renamed away): the YAML would read as if that entry's settings -- a mask, a
    target name -- applied to the renamed column, and they do not."""
    declared = pipeline.declared or pipeline
    declared_spec = _table_spec(declared, spec.source_name) if not spec.routed else None
    if declared_spec is None:
        return None
    followed = (pipeline.followed or {}).get(spec.source_name.lower(), {})
    entry = rename_conflict(followed, declared_spec, change.new_name or "")
    if entry is None:
        return None
    old, new = change.column, change.new_name
    return Step(change, "stop", f"{change.what}: the pipeline YAML configures a column named "
                f"{new} ({_settings(entry)}), which is no longer the column MySQL now calls "
                f"{new} (that is the former {old}); whose settings apply is ambiguous. Edit "
                f"`columns:` of {spec.source_name}: remove or rename the `{entry.source_column}:` "
                f"entry, and put the settings {old}'s column should have under `{new}:`, then "
                "run again")


def _expressions_naming(spec: Any, column: str) -> list[str]:
    """The computed columns' expressions and the row filter of ``spec`` that name ``column``:
    a rename or drop of it leaves them reading a column that is not there."""
    def names(text: str) -> bool:
        try:
            return column.lower() in {c.lower() for c in referenced_columns(text)}
        except ExpressionError:  # an expression validate rejects: the plan reports it
            return False

    found = [f"the expression of computed column {m.source_column}" for m in spec.columns
             if m.computed and names(m.expression)]
    if spec.filter and names(spec.filter):
        found.append("the row filter")
    return found


def _settings(entry: Any) -> str:
    parts = [f"name: {entry.target_column}" if entry.target_column else "",
             f"type: {entry.target_type}" if entry.target_type else "",
             f"mask: {entry.mask}" if entry.mask else "",
             "exclude: true" if entry.exclude else ""]
    return ", ".join(p for p in parts if p)


def _is_key(table: Any, source_column: str | None) -> bool:
    return source_column is not None and any(
        c.is_key and c.source_column and c.source_column.lower() == source_column.lower()
        for c in table.columns)


def _type_step(change: ColumnChange, policy: Any, table: Any, column: Any,
               tinyint1: str) -> Step:
    action = policy.widen_type
    if column is None:  # the table's columns are not known here
        return Step(change, action, change.what, by_policy=action == "stop")
    if column.declared_type:
        return Step(change, "nothing", f"{change.what}: the YAML declares the target type")
    try:
        new = map_mysql_type(MySQLType.parse(change.mysql_type or ""), tinyint1=tinyint1)  # type: ignore[arg-type]
    except (MySQLTypeError, ReplicatorError) as exc:
        return Step(change, "stop", f"{change.what}: {exc}")
    old = column.target_type
    if new == old:
        return Step(change, "nothing", f"{change.what}: the target type stays {old.describe()}")
    if not widens(old, new):
        return retype_step(change, policy.type_change, table,
                           dataclasses.replace(column, target_type=new),
                           f"{change.what}: {column.target_column} {old.describe()} -> "
                           f"{new.describe()}")
    return Step(change, action, f"{change.what}: {column.target_column} {old.describe()} -> "
                f"{new.describe()}", target_column=column.target_column, target_type=new,
                by_policy=action == "stop")


def _rekey_step(change: ColumnChange, table: Any) -> Step:
    """`key_change: recopy`: the stream restarts with the new key and the table is copied
    again (``KeyChanged``); a declared key is kept (the MERGE never used MySQL's)."""
    if table is not None and table.key_origin == "declared":
        return Step(change, "nothing", f"{change.what}: the YAML declares the table's key, "
                    "which the pipeline keeps merging by")
    return _recopy_step(change, table, "key_change", "the stream restarts with the new key "
                        "(the target is given it: DuckDB's rebuilt, Snowflake's declared key "
                        "replaced) and the table is copied again")


def _swap_recopy_step(change: ColumnChange, table: Any) -> Step:
    """`rename_table: recopy`: the table swapped onto the name is read on under it, as
    `follow` does, and copied again, because its rows were written outside the replicated
    set (a hand-written swap's new table may hold rows the old one never had, or lack some)."""
    return _recopy_step(change, table, "rename_table", "the table renamed onto the replicated "
                        "name is read on under it and copied again (its rows were written "
                        "outside the replicated set); target rows it lacks are removed at the "
                        "copy's end")


def _recopy_step(change: ColumnChange, table: Any, policy: str, what_happens: str) -> Step:
    """A re-copy under ``policy``, or its stop where the table cannot be copied again
    (``recopy_refused``: the mode, a log table, an outbox)."""
    refused = recopy_refused(table, None, policy)
    if refused is not None:
        return Step(change, "stop", f"{change.what} ({refused})", policy=policy)
    return Step(change, "recopy", f"{change.what}: {what_happens}", policy=policy)


class KeyChanged(EngineError):
    """A replicated table's primary key changed (`key_change: recopy`): the stream
    stops at the batch holding the DDL (nothing of it applied); the runner re-plans, queues
    the table's copy and streams on, so the decoders take the new key from then on."""

    def __init__(self, tables: Sequence[str], where: str, sql: str) -> None:
        super().__init__(f"the primary key of {', '.join(tables)} changed at {where}: "
                         f"{sql[:200]}", hint="run the pipeline again: it restarts the stream "
                         "with the new key and copies the table again")
        self.tables = tuple(tables)


def retype_step(change: ColumnChange, action: str, table: Any, column: Any, what: str) -> Step:
    """A type change the target cannot do in place, by the table's `type_change` policy:
    ``recopy`` where a copy rewrites every row (``recopy_refused`` says where not), else a
    stop. ``column``: the planned column in its new type; ``what`` names both types."""
    what = f"{what} is not a widening the target can do in place"
    refused = recopy_refused(table, column) if action == "recopy" else None
    if action == "recopy" and refused is None:
        return Step(change, "recopy", f"{what}: the target column is re-created in the new type "
                    "and the table copied again", target_column=column.target_column,
                    target_type=column.target_type, policy="type_change")
    return Step(change, "stop", what + (f" ({refused})" if refused else ""),
                policy="type_change", by_policy=refused is None)


def recopy_refused(table: Any, column: Any, policy: str = "type_change") -> str | None:
    """Why ``policy``'s recopy (a type change of ``column``, or a key change) cannot copy
    ``table`` (its TablePlan) again, or None: a copy rewrites every row of a merge-mode table,
    while a changelog, scd2 or log table would lose the history it holds, an outbox's copy
    would emit its rows as events again, and a key column cannot be dropped from under the
    rows it identifies."""
    if table is None:
        return None
    if column is not None and column.is_key:
        return "a key column's type change needs the whole target rebuilt: --snapshot always"
    if table.outbox is not None:
        return f"{policy}: recopy does not copy an outbox table again"
    if table.mode != "merge" or table.log_table is not None:
        kind = "log table" if table.mode == "merge" else f"{table.mode} table"
        return f"{policy}: recopy re-copies merge-mode tables; a {kind} keeps its history"
    return None


def widens(old: Any, new: Any) -> bool:
    """Whether every value of target type ``old`` fits ``new`` AND both warehouses can ALTER
    a column from one to the other in place (Snowflake: a NUMBER's precision up at the same
    scale, a VARCHAR's length up; DuckDB casts anything castable)."""
    if old.kind != new.kind:
        return False
    if old.kind == "integer":
        return (new.precision or 0) >= (old.precision or 0) and (new.bits or 64) >= (old.bits or 64)
    if old.kind == "decimal":
        return new.scale == old.scale and (new.precision or 0) >= (old.precision or 0)
    if old.kind == "string":
        return new.length is None or (old.length is not None and new.length >= old.length)
    return False  # timestamps, floats, ...: the same kind with other fields is not in place
