"""What a DDL statement changes of the replicated data, read with sqlglot (``classify``).

Three answers:

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
action is known, or a maintenance command recognised from its tokens, is ``NOTHING``. Each
replicated effect is listed as a ``ColumnChange``; what the pipeline does about it is
``engine.follow.schema_changes.decide``.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


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
