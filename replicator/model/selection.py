"""Which source tables a pipeline reads: exact names and pattern selections, tested in one place.

A table entry either names one table (``source: shop.orders``) or selects many
(``sources: {include: [...], exclude: [...]}``). Patterns follow Debezium's
``table.include.list`` convention: regular expressions matched against the *whole*
fully-qualified ``database.table`` name, case-insensitively (MySQL's names are). An unescaped
``.`` matches any character, so ``shop_[0-9]+.orders`` also selects ``shop_1xorders``: write
``shop_[0-9]+\\.orders``. A table is selected when some ``include`` pattern matches it and no
``exclude`` pattern does.

Patterns are Java-style as users write them for Debezium; Python's ``re`` accepts the common
subset (classes, groups, alternation, quantifiers incl. possessive ones and atomic groups);
``replicator validate`` reports a pattern it cannot compile at its line and column (R220).

``TableSelector`` is what readers, the engine and schema-change filtering test a table name
against; it travels to Spark's executors as JSON (``to_json``/``from_json``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


class PatternError(ValueError):
    """A pattern that does not compile; ``pattern`` and ``position`` say where."""

    def __init__(self, pattern: str, message: str, position: int | None) -> None:
        super().__init__(f"'{pattern}' is not a valid regular expression: {message}"
                         + (f" (at character {position + 1})" if position is not None else ""))
        self.pattern = pattern
        self.position = position


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A table pattern as the selector matches it (whole name, case-insensitive)."""
    try:
        return re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise PatternError(pattern, exc.msg, exc.pos) from None


@dataclass(frozen=True)
class TableSelection:
    """Tables selected by pattern: matched by some ``include``, by no ``exclude``."""

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()

    @cached_property
    def _compiled(self) -> tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]:
        return (tuple(compile_pattern(p) for p in self.include),
                tuple(compile_pattern(p) for p in self.exclude))

    def matches(self, name: str) -> bool:
        """Whether ``database.table`` is selected."""
        include, exclude = self._compiled
        return any(p.fullmatch(name) for p in include) and not any(
            p.fullmatch(name) for p in exclude)

    def describe(self) -> str:
        """How plans, reports and messages name the selection."""
        text = " | ".join(self.include)
        if self.exclude:
            text += " except " + " | ".join(self.exclude)
        return text

    def to_json(self) -> dict[str, list[str]]:
        return {"include": list(self.include), "exclude": list(self.exclude)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableSelection:
        return cls(tuple(data.get("include", ())), tuple(data.get("exclude", ())))

    def __getstate__(self) -> dict[str, Any]:  # compiled patterns are rebuilt, not pickled
        return {"include": self.include, "exclude": self.exclude}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "include", tuple(state["include"]))
        object.__setattr__(self, "exclude", tuple(state["exclude"]))


@dataclass(frozen=True)
class TableSelector:
    """A set of source tables: exact ``database.table`` names plus pattern selections.

    ``None`` where a selector is optional means "every table".
    """

    names: frozenset[str] = frozenset()  # lower-case database.table
    selections: tuple[TableSelection, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, tables: Iterable[str | TableSelection]) -> TableSelector:
        names: set[str] = set()
        selections: list[TableSelection] = []
        for table in tables:
            if isinstance(table, TableSelection):
                if table not in selections:
                    selections.append(table)
            else:
                names.add(table.lower())
        return cls(frozenset(names), tuple(selections))

    @cached_property
    def _seen(self) -> dict[str, bool]:
        return {}

    def matches(self, name: str) -> bool:
        """Whether the table ``database.table`` is in the set (memoised: readers ask per
        rows event)."""
        seen = self._seen
        found = seen.get(name)
        if found is None:
            found = name.lower() in self.names or any(s.matches(name) for s in self.selections)
            if len(seen) < 100_000:
                seen[name] = found
        return found

    def __getstate__(self) -> dict[str, Any]:
        return {"names": self.names, "selections": self.selections}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "names", state["names"])
        object.__setattr__(self, "selections", state["selections"])

    __contains__ = matches

    def wants_schema_change(self, database: str, tables: Sequence[str]) -> bool:
        """Whether DDL run in ``database`` that names ``tables`` can concern the set.

        DDL naming tables concerns it when one of them is selected, or when it ran in (or
        names a table of) a database of an exact name. DDL naming no table (CREATE/DROP
        DATABASE) concerns it when the database holds an exact name, or whenever patterns
        are in play: a pattern cannot say which databases it may match (the engine decides).
        """
        schemas = {name.split(".", 1)[0] for name in self.names}
        if any(self.matches(t) or t.split(".", 1)[0].lower() in schemas for t in tables):
            return True
        if database.lower() in schemas:
            return True
        return not tables and bool(self.selections)

    def to_json(self) -> str:
        entries: list[Any] = sorted(self.names)
        entries += [s.to_json() for s in self.selections]
        return json.dumps(entries)

    @classmethod
    def from_json(cls, text: str) -> TableSelector:
        entries = json.loads(text)
        return cls.of(TableSelection.from_json(e) if isinstance(e, dict) else str(e)
                      for e in entries)


def as_selector(tables: TableSelector | Iterable[str | TableSelection] | None) -> TableSelector | None:
    """A reader's ``tables`` argument as a selector (None: every table)."""
    if tables is None or isinstance(tables, TableSelector):
        return tables
    return TableSelector.of(tables)


class SelectedSource:
    """``routed`` and ``source_name`` of a table of the pipeline and of its plan: each reads
    either one named source table or the tables a ``sources:`` selection matches."""

    selection: TableSelection | None
    source_database: str
    source_table: str

    @property
    def routed(self) -> bool:
        """Fed by a pattern selection of source tables rather than one named table."""
        return self.selection is not None

    @property
    def source_name(self) -> str:
        """``db.table``; for a routed table, its selection's patterns (reports, messages)."""
        if self.selection is not None:
            return self.selection.describe()
        return f"{self.source_database}.{self.source_table}"
