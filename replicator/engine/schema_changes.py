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
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from replicator.errors import EngineError


class DdlEffect(enum.Enum):
    NOTHING = "nothing"
    ADD_COLUMNS = "add_columns"
    OTHER = "other"


@dataclass(frozen=True)
class DdlIntent:
    effect: DdlEffect
    what: str  # for the log line and the stop message: "adds an index", "drops a column"


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


@dataclass(frozen=True)
class AddedColumn:
    name: str
    mysql_type: str  # as MySQL writes it: decimal(10,2), int unsigned, enum('a','b')
    default: str | None  # the DEFAULT clause's SQL, None without one


def added_columns(sql: str) -> tuple[AddedColumn, ...]:
    """The columns an ADD_COLUMNS statement adds, in order (empty for any other statement)."""
    from sqlglot import exp

    if classify(sql).effect is not DdlEffect.ADD_COLUMNS:
        return ()
    statement = _parse(_without_alter_modifiers(sql.strip().rstrip(";").strip()))
    added = []
    for action in statement.args.get("actions") or []:
        if not isinstance(action, exp.ColumnDef):
            continue
        default = next((c.args["kind"].this for c in action.args.get("constraints") or []
                        if isinstance(c.args.get("kind"), exp.DefaultColumnConstraint)), None)
        added.append(AddedColumn(action.name, action.args["kind"].sql("mysql").lower(),
                                 None if default is None else default.sql("mysql")))
    return tuple(added)


def adds_columns_only(sql: str) -> bool:
    """True when ``sql``'s only replicated effect is new columns."""
    return classify(sql).effect is DdlEffect.ADD_COLUMNS


@lru_cache(maxsize=512)
def _classify(sql: str) -> DdlIntent:
    from sqlglot.errors import SqlglotError

    try:
        words = _words(sql)
    except SqlglotError:
        return DdlIntent(DdlEffect.OTHER, "a statement the parser cannot read")
    if not words:
        return DdlIntent(DdlEffect.OTHER, "an empty statement")
    if words[0] in _MAINTENANCE:
        return DdlIntent(DdlEffect.NOTHING, f"{words[0]} TABLE (maintenance)")
    if words[0] == "ALTER" and any(word.startswith("PARTITION") for word in words):
        return _partitioning(words)
    try:
        statement = _parse(_without_alter_modifiers(sql))
    except SqlglotError:
        return DdlIntent(DdlEffect.OTHER, "a statement the parser cannot read")
    intent = _intent(statement)
    if intent.what == "a schema change":  # name it: "TRUNCATE TABLE", "DROP TABLE", ...
        return DdlIntent(intent.effect, " ".join(word for word in words[:2] if word))
    return intent


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
    other = [what for effect, what in effects if effect is DdlEffect.OTHER]
    if other:
        return DdlIntent(DdlEffect.OTHER, ", ".join(other))
    if any(effect is DdlEffect.ADD_COLUMNS for effect, _ in effects):
        return DdlIntent(DdlEffect.ADD_COLUMNS, "adds columns")
    if not actions and not statement.args.get("options"):
        return DdlIntent(DdlEffect.OTHER, "an ALTER the parser did not understand")
    return DdlIntent(DdlEffect.NOTHING, ", ".join(what for _, what in effects) or "table options")


def _action(action: Any) -> tuple[DdlEffect, str]:
    from sqlglot import exp

    if isinstance(action, exp.ColumnDef):
        return DdlEffect.ADD_COLUMNS, "adds a column"
    if isinstance(action, exp.AddConstraint):
        if action.find(exp.PrimaryKey, exp.PrimaryKeyColumnConstraint) is not None:
            return DdlEffect.OTHER, "changes the primary key"
        return DdlEffect.NOTHING, "adds an index or constraint"
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        if kind in ("INDEX", "KEY", "FOREIGN KEY", "CONSTRAINT", "CHECK"):
            return DdlEffect.NOTHING, f"drops {'an' if kind == 'INDEX' else 'a'} {kind.lower()}"
        return DdlEffect.OTHER, f"drops a {kind.lower() or 'column'}"
    if isinstance(action, exp.DropPrimaryKey):
        return DdlEffect.OTHER, "drops the primary key"
    if isinstance(action, exp.RenameIndex):
        return DdlEffect.NOTHING, "renames an index"
    if isinstance(action, exp.ForceProperty):
        return DdlEffect.NOTHING, "rebuilds the table (FORCE)"
    if isinstance(action, exp.AlterColumn):
        # SET/DROP DEFAULT (and VISIBLE/INVISIBLE) change what future INSERTs get by default;
        # the binlog carries the values they end up with. A type given here is a change.
        if action.args.get("dtype") is None and action.args.get("using") is None:
            return DdlEffect.NOTHING, "changes a column default"
        return DdlEffect.OTHER, "changes a column type"
    if isinstance(action, exp.RenameColumn):
        return DdlEffect.OTHER, "renames a column"
    if isinstance(action, exp.ModifyColumn):
        return DdlEffect.OTHER, "modifies a column"
    return DdlEffect.OTHER, f"an ALTER action the engine does not follow ({action.sql('mysql')[:60]})"
