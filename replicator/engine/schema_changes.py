"""Which DDL the engine can follow (add a column) and which stops the pipeline.

Policy ``evolve`` (the default): an ``ALTER TABLE`` whose every action adds a column is
followed: the catalog is re-read, the plan rebuilt and the sink ALTERs the target. Anything
else on a replicated table (DROP/RENAME/MODIFY a column, TRUNCATE, DROP/RENAME TABLE) stops
the pipeline with a message saying what to do: the binlog's row images after such a change no
longer match the target, and guessing would corrupt it silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_COMMENTS = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.DOTALL)
_ALTER = re.compile(
    r"^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+(?:IF\s+EXISTS\s+)?"
    r"(?:`[^`]+`|\w+)(?:\s*\.\s*(?:`[^`]+`|\w+))?\s+(?P<actions>.+)$",
    re.IGNORECASE | re.DOTALL,
)
# ADD [COLUMN] [IF NOT EXISTS] name ... but not ADD INDEX/KEY/CONSTRAINT/...
_ADD_COLUMN = re.compile(
    r"^ADD\s+(?:COLUMN\s+)?(?!(?:INDEX|KEY|UNIQUE|PRIMARY|CONSTRAINT|FULLTEXT|SPATIAL|FOREIGN|"
    r"PARTITION|CHECK|PERIOD|SYSTEM|VECTOR)\b)",
    re.IGNORECASE,
)
# Table options that may ride along with ADD COLUMN and change nothing we replicate.
_HARMLESS = re.compile(r"^(?:ALGORITHM|LOCK)\s*=?\s*\w+$", re.IGNORECASE)


def _top_level_parts(text: str) -> Iterator[str]:
    """Split on commas outside parentheses, quotes and backticks."""
    depth, quote, start = 0, "", 0
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            yield text[start:index].strip()
            start = index + 1
    yield text[start:].strip()


def adds_columns_only(sql: str) -> bool:
    """True when ``sql`` is an ALTER TABLE whose actions only add columns."""
    match = _ALTER.match(_COMMENTS.sub(" ", sql).strip().rstrip(";"))
    if not match:
        return False
    actions = [part for part in _top_level_parts(match.group("actions")) if part]
    added = [part for part in actions if _ADD_COLUMN.match(part)]
    others = [part for part in actions if not _ADD_COLUMN.match(part)]
    return bool(added) and all(_HARMLESS.match(part) for part in others)
