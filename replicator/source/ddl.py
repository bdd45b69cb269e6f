"""DDL in the binlog: which statements change a schema, and which tables they name.

Both readers (``source.binlog`` and ``source.fast.reader``, through ``source.transactions``)
and ``replicator plan --ddl`` parse a Query event's statement with these functions.

The statement is read by sqlglot's MySQL tokenizer, not by regular expressions: comments
(``/* */``, ``--``, ``#``) vanish, a backquoted name is one token whatever it holds (a comma,
`` TO ``, a doubled backquote), and keywords used as names (``status``, ``date``) are still
names. What the statement *changes* is read later, on the parsed statement
(``engine.follow.intent``); here only its verb, its object and its tables are needed, for
every transaction's Query events, so the tokenizer (and its import) is reached only when the
first word is a DDL verb.
"""

from __future__ import annotations

from typing import Any

from replicator.model.changes import BinlogPosition, SchemaChange
from replicator.model.selection import TableSelector

_VERBS = ("ALTER", "CREATE", "DROP", "RENAME", "TRUNCATE")
# Words between the verb and the object: CREATE OR REPLACE TEMPORARY TABLE, ALTER ONLINE IGNORE.
_MODIFIERS = {"OR", "REPLACE", "ONLINE", "OFFLINE", "IGNORE", "TEMPORARY"}
_INDEX_WORDS = {"INDEX", "UNIQUE", "FULLTEXT", "SPATIAL"}
# Tokens that separate or end a list of names, never a name themselves.
_PUNCTUATION = {"COMMA", "DOT", "L_PAREN", "R_PAREN", "SEMICOLON", "EQ"}


def replicated_schema_change(
    query: str, database: str, position: BinlogPosition, ts_ms: int,
    wanted: TableSelector | None,
) -> SchemaChange | None:
    """``schema_change``, kept only when it can concern the replicated tables (None: every
    table; ``TableSelector.wants_schema_change`` decides). Both readers, the library's and
    the fast one, filter DDL by this."""
    change = schema_change(query, database, position, ts_ms)
    if change is None or wanted is None:
        return change
    return change if wanted.wants_schema_change(database, change.tables) else None


def schema_change(query: str, database: str, position: BinlogPosition, ts_ms: int) -> SchemaChange | None:
    """A DDL statement -> SchemaChange (None for anything that is not DDL).

    ``kind`` is the verb (``alter`` for CREATE/DROP INDEX, which change a table), or
    ``other`` for DDL on objects that hold no rows (views, triggers, routines, users...);
    ``tables`` are ``db.table`` names, the statement's database filling in bare ones (none for
    CREATE/DROP DATABASE, or when the statement cannot be tokenized: the engine then decides
    by the database alone)."""
    verb = _first_word(query)
    if verb not in _VERBS:
        return None
    kind = verb.lower()

    def change(kind: str, tables: list[str]) -> SchemaChange:
        return SchemaChange(database=database, sql=query, kind=kind, tables=tuple(tables),
                            position=position, ts_ms=ts_ms)

    tokens = _tokens(query)
    if tokens is None:
        return change(kind, [])
    words = [_word(token) for token in tokens]
    at = 1
    while at < len(words) and words[at] in _MODIFIERS:
        at += 1
    target = words[at] if at < len(words) else ""
    if verb == "TRUNCATE":
        at += target == "TABLE"
        return change(kind, _names(tokens, at, database, many=False))
    if verb == "RENAME":  # RENAME TABLE a TO b, c TO d: every name, old and new
        return change(kind, _names(tokens, at + 1, database, many=True, separators={"TO"}))
    if target in ("DATABASE", "SCHEMA"):
        return change(kind, [])
    if target == "TABLE":
        at += 1
        if at < len(words) and words[at] == "IF":  # IF [NOT] EXISTS
            at += 3 if at + 1 < len(words) and words[at + 1] == "NOT" else 2
        return change(kind, _names(tokens, at, database, many=verb == "DROP"))
    if target in _INDEX_WORDS and verb in ("CREATE", "DROP"):
        on = next((i for i in range(at, len(words)) if words[i] == "ON"), None)
        return change("alter", [] if on is None else _names(tokens, on + 1, database,
                                                            many=False))
    return change("other", [])


def _first_word(query: str) -> str:
    """The statement's first word, upper-cased, after whitespace and comments (cheap: no
    tokenizer for the BEGIN of every transaction)."""
    at, end = 0, len(query)
    while at < end:
        if query[at].isspace():
            at += 1
        elif query.startswith("/*", at):
            close = query.find("*/", at + 2)
            at = end if close < 0 else close + 2
        elif query.startswith("#", at) or query.startswith("-- ", at):
            newline = query.find("\n", at)
            at = end if newline < 0 else newline + 1
        else:
            break
    stop = at
    while stop < end and query[stop].isalpha():
        stop += 1
    return query[at:stop].upper()


def _tokens(query: str) -> list[Any] | None:
    """sqlglot's MySQL tokens of ``query`` (None if it cannot be tokenized). sqlglot reads
    RENAME's rest as one opaque string: that string is tokenized again."""
    from sqlglot.dialects.mysql import MySQL
    from sqlglot.errors import SqlglotError
    from sqlglot.tokens import TokenType

    try:
        tokens = MySQL().tokenize(query)
        if len(tokens) == 2 and tokens[1].token_type == TokenType.STRING \
                and tokens[0].text.upper() == "RENAME":
            return tokens[:1] + MySQL().tokenize(tokens[1].text)
    except SqlglotError:
        return None
    return tokens


def _word(token: Any) -> str:
    """A keyword-like token's upper-cased text; '' for a quoted name or punctuation (so
    `table` in backquotes is never taken for the keyword TABLE)."""
    if token.token_type.name in _PUNCTUATION or _quoted(token):
        return ""
    return token.text.upper()


def _quoted(token: Any) -> bool:
    return token.token_type.name in ("IDENTIFIER", "STRING")


def _names(tokens: list[Any], at: int, database: str, *, many: bool,
           separators: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Qualified names from ``tokens[at]`` on: ``db.t`` or ``t``; with ``many``, a list
    separated by commas (and by ``separators`` words, such as RENAME's TO)."""
    names: list[str] = []
    while at < len(tokens):
        token = tokens[at]
        if token.token_type.name in _PUNCTUATION:
            break
        parts = [token.text]
        at += 1
        if at + 1 < len(tokens) and tokens[at].token_type.name == "DOT":
            parts.append(tokens[at + 1].text)
            at += 2
        names.append(f"{parts[0]}.{parts[1]}" if len(parts) == 2 else f"{database}.{parts[0]}")
        if not many or at >= len(tokens):
            break
        if tokens[at].token_type.name == "COMMA" or (
                not _quoted(tokens[at]) and tokens[at].text.upper() in separators):
            at += 1
            continue
        break
    return names
