"""What a DDL statement on a replicated table means for the pipeline, read with sqlglot.

Three answers (``classify``):

- ``NOTHING``: it changes nothing the pipeline replicates -- indexes and keys other than the
  primary key, constraints, column defaults, comments, table options (ENGINE, ROW_FORMAT,
  AUTO_INCREMENT, ...), ``ALGORITHM``/``LOCK``, ``FORCE`` rebuilds, partitioning that keeps
  the rows, ``OPTIMIZE``/``ANALYZE``/``CHECK``/``REPAIR``. The row images after it are the
  row images before it: the engine logs it and streams on. (Today's users saw each of these
  stop the pipeline.)
- ``ADD_COLUMNS``: its only replicated effect is new columns (``ADD COLUMN``, possibly beside
  index or option changes): the engine re-reads the catalog, re-plans and the sink ALTERs
  the target.
- ``OTHER``: anything else (DROP/RENAME/MODIFY a column, the primary key, TRUNCATE, DROP or
  RENAME TABLE, partition operations that drop or swap rows without row events, and any
  statement the parser cannot read): the row images after it may no longer match the target,
  and guessing would corrupt it silently, so the engine stops with a message.

A statement sqlglot cannot parse is never taken as harmless: only a parsed ALTER whose every
action is known, or a maintenance command recognised from its tokens, is ``NOTHING``.

``decide`` then says, change by change, what the pipeline does about it (the table's
``schema_changes:`` policy). What a followed change does to a batch's rows (an added
column's DEFAULT, a TRUNCATE's cut) is ``engine.ddl_rows``.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from replicator.errors import EngineError, ReplicatorError
from replicator.model.catalog import MySQLType, MySQLTypeError
from replicator.model.followed import rename_conflict
from replicator.plan.types import map_mysql_type


class DdlEffect(enum.Enum):
    NOTHING = "nothing"
    ADD_COLUMNS = "add_columns"
    OTHER = "other"


class ChangeKind(enum.Enum):
    """One replicated effect of a DDL; the value is its key under `schema_changes:`."""

    ADD_COLUMN = "add_column"
    TYPE_CHANGE = "widen_type"  # widening or not is decided against the planned type
    RENAME_COLUMN = "rename_column"
    DROP_COLUMN = "drop_column"
    KEY_CHANGE = "key_change"
    TRUNCATE = "truncate"
    RENAME_TABLE = "rename_table"
    DROP_TABLE = "drop_table"
    UNKNOWN = "unknown"  # nothing can follow it: always a stop


@dataclass(frozen=True)
class ColumnChange:
    kind: ChangeKind
    what: str
    column: str | None = None  # the source column it changes (the old name for a rename)
    new_name: str | None = None  # RENAME_COLUMN: the new name
    mysql_type: str | None = None  # ADD_COLUMN / TYPE_CHANGE: the type as MySQL writes it
    default: str | None = None  # ADD_COLUMN: the DEFAULT clause's SQL, None without one


@dataclass(frozen=True)
class DdlIntent:
    effect: DdlEffect
    what: str  # for the log line and the stop message: "adds an index", "drops a column"
    changes: tuple[ColumnChange, ...] = ()  # the replicated effects, in statement order


_MAINTENANCE = {"OPTIMIZE", "ANALYZE", "CHECK", "REPAIR", "CHECKSUM"}
# Partition operations that keep every row where it is (or move rows between partitions of the
# same table): nothing a row image shows changes.
_PARTITION_KEEPS_ROWS = {"ADD", "REORGANIZE", "COALESCE", "ANALYZE", "CHECK", "OPTIMIZE",
                         "REBUILD", "REPAIR"}
# DROP / TRUNCATE PARTITION delete rows, EXCHANGE PARTITION swaps them with another table's:
# none of it is logged as row events, so the target would silently keep or miss rows.
_PARTITION_CHANGES_ROWS = {"DROP", "TRUNCATE", "EXCHANGE", "DISCARD", "IMPORT"}
# MariaDB's ALTER modifiers that sqlglot's MySQL grammar does not know; they change how the
# server runs the ALTER, never what it does.
_ALTER_MODIFIERS = {"ONLINE", "IGNORE"}


def classify(sql: str) -> DdlIntent:
    """What ``sql`` changes of the replicated data (see the module docstring)."""
    return _classify(sql.strip().rstrip(";").strip())


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


# The kinds whose `follow` the run carries out (``engine.applier.BatchApplier``); one the
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
    # sqlglot: off the start-up of the commands that import this module
    from replicator.plan.expressions.errors import ExpressionError
    from replicator.plan.expressions.parsing import referenced_columns

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
    """A replicated table's primary key changed (`key_change: recopy`): the streaming query
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


@dataclass(frozen=True)
class AddedColumn:
    name: str
    mysql_type: str  # as MySQL writes it: decimal(10,2), int unsigned, enum('a','b')
    default: str | None  # the DEFAULT clause's SQL, None without one


def added_columns(sql: str) -> tuple[AddedColumn, ...]:
    """The columns a statement adds, in order (beside other actions too)."""
    intent = classify(sql)
    return tuple(AddedColumn(c.column or "", c.mysql_type or "", c.default)
                 for c in intent.changes if c.kind is ChangeKind.ADD_COLUMN)


def adds_columns_only(sql: str) -> bool:
    """True when ``sql``'s only replicated effect is new columns."""
    return classify(sql).effect is DdlEffect.ADD_COLUMNS


@lru_cache(maxsize=512)
def _classify(sql: str) -> DdlIntent:
    from sqlglot.errors import SqlglotError

    try:
        words = _words(sql)
    except SqlglotError:
        return _unknown("a statement the parser cannot read")
    if not words:
        return _unknown("an empty statement")
    if words[0] in _MAINTENANCE:
        return DdlIntent(DdlEffect.NOTHING, f"{words[0]} TABLE (maintenance)")
    if words[0] == "ALTER" and any(word.startswith("PARTITION") for word in words):
        intent = _partitioning(words)
        return intent if intent.effect is DdlEffect.NOTHING else DdlIntent(
            intent.effect, intent.what, (ColumnChange(ChangeKind.UNKNOWN, intent.what),))
    try:
        statement = _parse(_without_alter_modifiers(sql))
    except SqlglotError:
        return _unknown("a statement the parser cannot read")
    intent = _intent(statement)
    if intent.what == "a schema change":  # name it: "TRUNCATE TABLE", "DROP TABLE", ...
        kind = _table_kind(words)
        what = {ChangeKind.TRUNCATE: "TRUNCATE TABLE", ChangeKind.RENAME_TABLE: "RENAME TABLE"}.get(
            kind, " ".join(word for word in words[:2] if word))
        return DdlIntent(intent.effect, what, (ColumnChange(kind, what),))
    return intent


def _table_kind(words: list[str]) -> ChangeKind:
    """TRUNCATE / DROP TABLE / RENAME TABLE (and DROP DATABASE: every table of it dropped)."""
    if words[0] == "TRUNCATE":
        return ChangeKind.TRUNCATE
    if words[0] == "DROP" and len(words) > 1 and words[1] in ("TABLE", "DATABASE", "SCHEMA"):
        return ChangeKind.DROP_TABLE
    if words[0] == "RENAME":  # sqlglot reads the rest as one opaque text
        return ChangeKind.RENAME_TABLE
    return ChangeKind.UNKNOWN


def _unknown(what: str) -> DdlIntent:
    return DdlIntent(DdlEffect.OTHER, what, (ColumnChange(ChangeKind.UNKNOWN, what),))


def _words(sql: str) -> list[str]:
    """The statement's upper-cased token texts (comments dropped by the tokenizer); quoted
    names and strings are blanked, so a column named `partition` is not a keyword."""
    from sqlglot.dialects.mysql import MySQL
    from sqlglot.tokens import TokenType

    quoted = (TokenType.IDENTIFIER, TokenType.STRING)
    return ["" if token.token_type in quoted else token.text.upper()
            for token in MySQL().tokenize(sql)]


def _without_alter_modifiers(sql: str) -> str:
    """``ALTER ONLINE IGNORE TABLE`` -> ``ALTER TABLE``, cut at the tokens' own offsets."""
    from sqlglot.dialects.mysql import MySQL

    tokens = MySQL().tokenize(sql)
    if not tokens or tokens[0].text.upper() != "ALTER":
        return sql
    cut = [t for t in tokens[1:3] if t.text.upper() in _ALTER_MODIFIERS]
    for token in reversed(cut):
        sql = sql[:token.start] + sql[token.end + 1:]
    return sql


def _parse(sql: str) -> Any:
    import sqlglot

    # sqlglot logs a warning for every statement it reads as an opaque Command; here that is
    # an answer (OTHER), not a problem worth a line in the user's log.
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return sqlglot.parse_one(sql, read="mysql")
    finally:
        logger.setLevel(level)


def _partitioning(words: list[str]) -> DdlIntent:
    """An ALTER TABLE whose one action is a partition operation (anything mixed with other
    actions is OTHER: too rare to be worth guessing)."""
    first = next(i for i, w in enumerate(words) if w.startswith("PARTITION"))
    verb = words[first] if words[first] != "PARTITION" else words[first - 1]
    # ALTER TABLE name VERB ... or ALTER TABLE db . name VERB ...
    action_at = first - 1 if words[first] in ("PARTITION", "PARTITIONING") else first
    if action_at not in (3, 5) or words[1] != "TABLE":
        return DdlIntent(DdlEffect.OTHER, "a partition operation beside other changes")
    if verb in _PARTITION_CHANGES_ROWS:
        return DdlIntent(DdlEffect.OTHER, f"{verb} PARTITION changes rows without row events")
    if verb in ("PARTITION BY", "PARTITIONING") or verb in _PARTITION_KEEPS_ROWS:
        return DdlIntent(DdlEffect.NOTHING, "changes partitioning (rows kept)")
    return DdlIntent(DdlEffect.OTHER, f"a partition operation ({verb} PARTITION)")


def _intent(statement: Any) -> DdlIntent:
    from sqlglot import exp

    if isinstance(statement, exp.Analyze):
        return DdlIntent(DdlEffect.NOTHING, "ANALYZE TABLE (maintenance)")
    if isinstance(statement, exp.Create | exp.Drop) and str(
            statement.args.get("kind") or "").upper() == "INDEX":
        return DdlIntent(DdlEffect.NOTHING, f"{type(statement).__name__.upper()} INDEX")
    if not isinstance(statement, exp.Alter) or str(statement.args.get("kind") or "").upper() != "TABLE":
        return DdlIntent(DdlEffect.OTHER, "a schema change")
    actions = statement.args.get("actions") or []
    effects = [_action(action) for action in actions]
    changes = tuple(change for _, _, found in effects for change in found)
    other = [what for effect, what, _ in effects if effect is DdlEffect.OTHER]
    if other:
        return DdlIntent(DdlEffect.OTHER, ", ".join(other), changes)
    if any(effect is DdlEffect.ADD_COLUMNS for effect, _, _ in effects):
        return DdlIntent(DdlEffect.ADD_COLUMNS, "adds columns", changes)
    if not actions and not statement.args.get("options"):
        return _unknown("an ALTER the parser did not understand")
    return DdlIntent(DdlEffect.NOTHING, ", ".join(what for _, what, _ in effects) or "table options")


def _action(action: Any) -> tuple[DdlEffect, str, tuple[ColumnChange, ...]]:
    """One ALTER action: its effect, its "what", and its replicated changes."""
    from sqlglot import exp

    def change(kind: ChangeKind, what: str, **fields: Any) -> tuple[DdlEffect, str,
                                                                   tuple[ColumnChange, ...]]:
        effect = DdlEffect.ADD_COLUMNS if kind is ChangeKind.ADD_COLUMN else DdlEffect.OTHER
        return effect, what, (ColumnChange(kind, what, **fields),)

    if isinstance(action, exp.ColumnDef):
        return change(ChangeKind.ADD_COLUMN, f"adds column {action.name}", column=action.name,
                      mysql_type=_type_text(action), default=_default(action))
    if isinstance(action, exp.AddConstraint):
        if action.find(exp.PrimaryKey, exp.PrimaryKeyColumnConstraint) is not None:
            return change(ChangeKind.KEY_CHANGE, "changes the primary key")
        return DdlEffect.NOTHING, "adds an index or constraint", ()
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        if kind in ("INDEX", "KEY", "FOREIGN KEY", "CONSTRAINT", "CHECK"):
            return (DdlEffect.NOTHING,
                    f"drops {'an' if kind == 'INDEX' else 'a'} {kind.lower()}", ())
        if kind in ("", "COLUMN"):
            names = [t.name for t in action.args.get("tables") or []]
            if len(names) == 1:
                return change(ChangeKind.DROP_COLUMN, "drops a column", column=names[0])
        return change(ChangeKind.UNKNOWN, f"drops a {kind.lower() or 'column'}")
    if isinstance(action, exp.DropPrimaryKey):
        return change(ChangeKind.KEY_CHANGE, "drops the primary key")
    if isinstance(action, exp.RenameIndex):
        return DdlEffect.NOTHING, "renames an index", ()
    if isinstance(action, exp.ForceProperty):
        return DdlEffect.NOTHING, "rebuilds the table (FORCE)", ()
    if isinstance(action, exp.AlterColumn):
        # SET/DROP DEFAULT (and VISIBLE/INVISIBLE) change what future INSERTs get by default;
        # the binlog carries the values they end up with. A type given here is a change.
        if action.args.get("dtype") is None and action.args.get("using") is None:
            return DdlEffect.NOTHING, "changes a column default", ()
        if action.args.get("dtype") is not None and action.args.get("using") is None:
            return change(ChangeKind.TYPE_CHANGE, "changes a column type", column=action.name,
                          mysql_type=action.args["dtype"].sql("mysql").lower())
        return change(ChangeKind.UNKNOWN, "changes a column type")
    if isinstance(action, exp.RenameColumn):
        return change(ChangeKind.RENAME_COLUMN, "renames a column", column=action.this.name,
                      new_name=action.args["to"].name)
    if isinstance(action, exp.ModifyColumn):
        definition = action.this
        if not isinstance(definition, exp.ColumnDef) or definition.args.get("kind") is None:
            return change(ChangeKind.UNKNOWN, "modifies a column")
        old = action.args.get("rename_from")
        found: tuple[ColumnChange, ...] = ()
        name = definition.name
        if old is not None and old.name.lower() != name.lower():
            found += (ColumnChange(ChangeKind.RENAME_COLUMN, "renames a column", column=old.name,
                                   new_name=name),)
        found += (ColumnChange(ChangeKind.TYPE_CHANGE, "modifies a column", column=name,
                               mysql_type=_type_text(definition)),)
        return DdlEffect.OTHER, "renames a column" if len(found) > 1 else "modifies a column", found
    if isinstance(action, exp.AlterRename):
        return change(ChangeKind.RENAME_TABLE, "renames the table")
    return change(ChangeKind.UNKNOWN,
                  f"an ALTER action the engine does not follow ({action.sql('mysql')[:60]})")


def _type_text(definition: Any) -> str:
    return str(definition.args["kind"].sql("mysql").lower())


def _default(definition: Any) -> str | None:
    from sqlglot import exp

    default = next((c.args["kind"].this for c in definition.args.get("constraints") or []
                    if isinstance(c.args.get("kind"), exp.DefaultColumnConstraint)), None)
    return None if default is None else str(default.sql("mysql"))
