"""Entries of a pipeline YAML that no longer match the live MySQL schema, each with its edit.

``replicator init`` pins every column (``qty: {source_type: "int(11)"}``) so that
``plan --offline`` works. When MySQL renames, drops or retypes a column the run follows it
(``model.followed``: pins never stop a run, binding entries follow their column and the run
records where in the checkpoint's ``followed_columns.json``), but the YAML still says what
it said. ``find_stale`` names every such entry, with the line it is written on and the exact
edit; ``replicator check``, ``status`` and the run's start-up notice print them, and
``replicator init --refresh`` (``config.refresh``) writes the refreshable ones.

What is stale, per table named by ``source:``:

- **renamed**: a column entry, a ``key:`` or a ``track_history:`` name whose column the run
  followed to another name (the followed record: declared name -> current name);
- **dropped**: an entry whose column the run followed out (record None), or a pin whose
  column is simply not in MySQL any more (a pin states no intent: it goes);
- **retyped**: an entry's ``source_type`` that is not the live column's type, compared in
  MySQL's normalized form (``MySQLType``; an integer's display width is not a type);
- **changed**: a ``primary_key:`` pin (what `replicator init` writes instead of ``key:``)
  that is not MySQL's primary key any more: a key column renamed, or another key;
- **added**: a live column that a *fully pinned* table (every entry declares its
  ``source_type``: the list is the table's complete column list, config.semantic) has no
  entry for, unless the table ignores added columns (`schema_changes.add_column: ignore`);
- **missing**: a binding entry (or a key or track_history name) whose column is not in MySQL
  while no run followed a rename or drop of it: where its settings belong is unknown, and the
  run stops on it (R302 / R303 / R215). Only this kind is ``blocking``, and no refresh
  writes it: a mask moved to the wrong column, or dropped from a renamed one, fails open.
- **conflict**: a binding entry renamed onto the name another entry keeps (the run stops
  with the edit: ``model.followed.rename_conflict``); blocking, left to a human.

Everything else is a warning: the run follows the change whatever the YAML says.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from replicator.config.loader import LoadedDocument, load_document
from replicator.model.catalog import INTEGER_TYPES, Catalog, MySQLType, MySQLTypeError, SourceTable
from replicator.model.followed import FollowedColumns, current_name
from replicator.model.pipeline import ColumnMapping, Pipeline, TablePipeline

StaleKind = Literal["renamed", "dropped", "retyped", "added", "missing", "conflict", "changed"]
Section = Literal["columns", "key", "track_history", "primary_key"]
REFRESH_COMMAND = "replicator init --refresh"
# A name written plain in YAML (a column key, a key: item) when it looks like this and is not
# a word YAML 1.1 reads as a boolean or null (`replicator init` and `--refresh` alike).
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YAML_WORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"})


@dataclass(frozen=True)
class StaleEntry:
    """One setting of the YAML that no longer matches the live source, and its edit."""

    source_table: str  # db.table, as the YAML writes it
    table_index: int  # tables[table_index] in the YAML
    section: Section
    declared: str  # the column name the YAML writes (the entry's key, the list item)
    kind: StaleKind
    problem: str  # "renamed to quantity in MySQL"
    edit: str  # "rename the entry to quantity"
    live_name: str | None = None  # the column's name in MySQL now (None: not there)
    live_type: str | None = None  # retyped, added: its type as `replicator init` writes it
    index: int | None = None  # key, track_history: the item's position in the list
    after: str | None = None  # added: the entry it goes after, by its refreshed name
    live_key: tuple[str, ...] | None = None  # changed: MySQL's primary key
    binding: bool = False  # an entry with settings, or a key / track_history name
    blocking: bool = False  # the run stops on it until the YAML is edited
    refreshable: bool = True  # `replicator init --refresh` writes the edit
    # The setting to point at, under the table: ("columns", "qty"), ("key", 0); an added
    # column: the entry it goes after, or ("columns",).
    where: tuple[str | int, ...] = ()
    file: str | None = None
    line: int | None = None
    col: int | None = None

    @property
    def setting(self) -> str:
        """Where in the table entry: ``columns.qty``, ``key[0]``, ``track_history[1]``."""
        if self.section == "columns":
            return f"columns.{self.declared}"
        if self.index is None:
            return self.section
        return f"{self.section}[{self.index}]"

    @property
    def fix(self) -> str:
        """The edit, and the command that writes it when there is one."""
        if self.refreshable and self.file:
            return f"{self.edit} (or run: {REFRESH_COMMAND} {self.file})"
        return self.edit

    def text(self) -> str:
        """``pipelines/shop.yaml:14: shop.orders columns.qty: renamed to quantity in MySQL:
        rename the entry to quantity (or run: replicator init --refresh pipelines/shop.yaml)``"""
        where = f"{self.file}:{self.line}: " if self.file and self.line else (
            f"{self.file}: " if self.file else "")
        return f"{where}{self.source_table} {self.setting}: {self.problem}: {self.fix}"

    def as_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "setting": self.setting, "fix": self.fix,
                "text": self.text()}


class StaleContext(Protocol):
    """What ``stale_entries`` reads of a ``replicator.context.Context`` (which sits above
    config: the engine and the CLI pass theirs)."""

    pipeline: Pipeline

    @property
    def catalog(self) -> Catalog: ...

    def followed_columns(self) -> FollowedColumns: ...

    def ignored_columns(self) -> dict[str, set[str]]: ...


def stale_entries(context: StaleContext) -> list[StaleEntry]:
    """The stale entries of ``context``'s pipeline file against its live catalog and the
    renames and drops its runs followed (the run's start-up notice: one line each)."""
    declared = context.pipeline.declared or context.pipeline
    document = load_document(declared.path) if declared.path else None
    return find_stale(declared, context.followed_columns(), context.catalog,
                      ignored=context.ignored_columns(), document=document)


def comparable_type(mysql_type: MySQLType) -> MySQLType:
    """``mysql_type`` as compared with a pin: an integer's display width is not its type
    (MariaDB and MySQL 5.7 write ``int(11)``, MySQL 8.0.19+ ``int``), except TINYINT(1),
    which the `tinyint1` policy reads as a boolean."""
    if mysql_type.name in INTEGER_TYPES and mysql_type.length != 1:
        return dataclasses.replace(mysql_type, length=None)
    return mysql_type


def same_type(declared: str, live: MySQLType) -> bool:
    """Whether a ``source_type`` as written says ``live`` (a text that is no MySQL type is
    validate's R208, not a stale entry)."""
    try:
        return comparable_type(MySQLType.parse(declared)) == comparable_type(live)
    except MySQLTypeError:
        return True


def fully_pinned(table: TablePipeline) -> bool:
    """Every column entry declares its ``source_type`` (an excluded one may not): the list is
    the table's complete column list (config.semantic), so a live column it lacks is added."""
    entries = [m for m in table.columns if not m.computed]
    return (any(m.source_type for m in entries)
            and all(m.source_type or m.exclude for m in entries))


def find_stale(pipeline: Pipeline, followed: FollowedColumns, catalog: Catalog, *,
               ignored: Mapping[str, set[str]] | None = None,
               document: LoadedDocument | None = None) -> list[StaleEntry]:
    """Every stale entry of ``pipeline`` (the YAML's own: ``declared`` when it has one)
    against the live ``catalog`` and the ``followed`` renames and drops, in file order per
    table. ``ignored``: per ``db.table`` (lower case), columns added and ignored
    (`add_column: ignore`), never pinned. ``document``: the loaded file, for line numbers."""
    pipeline = pipeline.declared or pipeline
    entries: list[StaleEntry] = []
    for index, table in enumerate(pipeline.tables):
        if table.routed:
            continue  # a `sources:` selection's columns are the live tables' (R247)
        live = catalog.table(table.source_database, table.source_table)
        if live is None:
            continue  # `check` fails it, the plan stops or leaves it out (drop_table)
        table_followed = followed.get(table.source_name.lower(), {})
        skip_added = ((ignored or {}).get(table.source_name.lower(), set())
                      if pipeline.schema_changes_for(table).add_column != "ignore" else None)
        found = _TableStale(table, index, live, table_followed).find(skip_added)
        placed = [_placed(entry, pipeline.path, document) for entry in found]
        entries.extend(sorted(placed, key=lambda e: (e.line or 0, e.col or 0)))
    return entries


class _TableStale:
    """The stale entries of one table (``find_stale``)."""

    def __init__(self, table: TablePipeline, index: int, live: SourceTable,
                 followed: Mapping[str, str | None]) -> None:
        self.table, self.index, self.live, self.followed = table, index, live, followed
        self.entries: list[StaleEntry] = []

    def add(self, section: Section, declared: str, kind: StaleKind, problem: str, edit: str,
            **more: Any) -> None:
        blocking = kind in ("missing", "conflict")
        refreshable = more.pop("refreshable", True) and not blocking
        more.setdefault("where", (section, declared) if section == "columns"
                        else (section,) if more.get("index") is None
                        else (section, more["index"]))
        self.entries.append(StaleEntry(
            source_table=self.table.source_name, table_index=self.index, section=section,
            declared=declared, kind=kind, problem=problem, edit=edit, blocking=blocking,
            refreshable=refreshable, **more))

    def find(self, skip_added: set[str] | None) -> list[StaleEntry]:
        """``skip_added``: added columns not to pin (None: the table ignores added ones)."""
        entries = [m for m in self.table.columns if not m.computed]
        # Each live column (lower case) with an entry -> that entry's declared name: the one
        # that names it as it is now when two entries mean it (a column re-added under a name
        # another was renamed away from), else the first.
        kept: dict[str, str] = {}
        for mapping in sorted(entries, key=lambda m: current_name(
                self.followed, m.source_column) != m.source_column):
            now = current_name(self.followed, mapping.source_column)
            column = self.live.column(now) if now is not None else None
            if column is not None:
                kept.setdefault(column.name.lower(), mapping.source_column)
        for mapping in entries:
            self._column_entry(mapping, kept)
        self._names("key", self.table.key or ())
        self._names("track_history", self.table.track_history or ())
        self._primary_key()
        if skip_added is not None and fully_pinned(self.table):
            self._added(kept, skip_added)
        return self.entries

    def _column_entry(self, mapping: ColumnMapping, kept: Mapping[str, str]) -> None:
        declared = mapping.source_column
        binding = mapping.binding
        now = current_name(self.followed, declared)
        column = self.live.column(now) if now is not None else None
        if now is None:
            self.add("columns", declared, "dropped", "dropped in MySQL",
                     "remove the entry" + (" (since the drop its settings apply to nothing)"
                                           if binding else ""), binding=binding)
            return
        if column is None:
            if binding:
                self.add("columns", declared, "missing",
                         ("not in MySQL" if now.lower() == declared.lower()
                          else f"followed to {now}, which is not in MySQL")
                         + ", and no run followed a rename or drop of it (the run stops: R302)",
                         "rename the entry to the column's new name, or remove it",
                         binding=True)
            else:
                self.add("columns", declared, "dropped", "not in MySQL any more",
                         "remove the entry")
            return
        if column.name.lower() != declared.lower():
            owner = kept.get(column.name.lower())
            if owner is not None and owner.lower() != declared.lower():
                # Two entries for one column: the one that names it as it is now stays.
                if binding:
                    self.add("columns", declared, "conflict",
                             f"renamed to {column.name} in MySQL, which the entry {owner} "
                             "names too (the run stops)",
                             f"merge the settings of {declared} and {owner} into one entry "
                             f"{column.name}", binding=True, live_name=column.name)
                else:
                    self.add("columns", declared, "dropped",
                             f"renamed to {column.name} in MySQL, which the entry {owner} "
                             "names already", "remove the entry", live_name=column.name)
                return
            self.add("columns", declared, "renamed", f"renamed to {column.name} in MySQL",
                     f"rename the entry to {column.name}", binding=binding,
                     live_name=column.name)
        if mapping.source_type and not same_type(mapping.source_type, column.mysql_type):
            live_type = str(column.mysql_type)
            self.add("columns", declared, "retyped",
                     f"source_type is {live_type} in MySQL, not {mapping.source_type}",
                     f"write source_type: {_quoted(live_type)}", binding=binding,
                     live_name=column.name, live_type=live_type)

    def _names(self, section: Section, names: tuple[str, ...]) -> None:
        """``key:`` / ``track_history:`` names: each follows its column."""
        for position, declared in enumerate(names):
            now = current_name(self.followed, declared)
            column = self.live.column(now) if now is not None else None
            if column is None:
                if section == "key":
                    self.add(section, declared, "missing",
                             "not in MySQL any more (the run stops: R303)",
                             "declare a key of columns MySQL has (or remove `key:` to use "
                             f"the primary key: {', '.join(self.live.primary_key) or 'none'})",
                             index=position, binding=True)
                elif now is None and len(names) > 1:
                    self.add(section, declared, "dropped",
                             "dropped in MySQL",
                             f"remove {declared} from track_history", index=position,
                             binding=True)
                elif now is None:
                    self.add(section, declared, "dropped",
                             "dropped in MySQL: it was the only "
                             "tracked column", "list the columns to track instead, or remove "
                             "`track_history:` to track every column", index=position,
                             binding=True, refreshable=False)
                else:
                    self.add(section, declared, "missing",
                             ("not in MySQL" if now.lower() == declared.lower()
                              else f"followed to {now}, which is not in MySQL")
                             + ", and no run followed a rename or drop of it (the run stops: "
                             "R215)",
                             f"write the column's new name instead of {declared}, or remove it",
                             index=position, binding=True)
            elif column.name.lower() != declared.lower():
                self.add(section, declared, "renamed", f"renamed to {column.name} in MySQL",
                         f"write {column.name} instead of {declared} in {section}",
                         index=position, binding=True, live_name=column.name)

    def _primary_key(self) -> None:
        """The `primary_key:` pin against MySQL's primary key (a pin: the live one is the key
        anyway; the run follows a key change by `schema_changes.key_change`)."""
        pinned = self.table.primary_key
        live = self.live.primary_key
        if not pinned or [n.lower() for n in pinned] == [n.lower() for n in live]:
            return
        written = ", ".join(pinned)
        if not live:
            self.add("primary_key", written, "changed", "MySQL's table has no primary key now",
                     "remove `primary_key:`, and declare `key:` (the columns that identify a "
                     "row) or add a primary key in MySQL", refreshable=False)
            return
        self.add("primary_key", written, "changed",
                 f"the primary key is ({', '.join(live)}) in MySQL",
                 f"write primary_key: [{', '.join(yaml_name(n) for n in live)}]",
                 live_key=tuple(live))

    def _added(self, kept: Mapping[str, str], skip: set[str]) -> None:
        # An entry whose column went without a followed record may have been renamed to one
        # of these: pinning it would give a human two entries to merge. Settle that first.
        lost = [e.declared for e in self.entries if e.kind == "missing" and e.section == "columns"]
        previous: str | None = None
        # The line to point at: the entry the column goes after, as the file writes it now.
        at: tuple[str | int, ...] = ("columns",)
        for column in sorted(self.live.columns, key=lambda c: c.ordinal):
            name = column.name.lower()
            if name in kept:
                previous, at = column.name, ("columns", kept[name])
                continue
            if name in skip:
                continue
            live_type = str(column.mysql_type)
            place = f"after {previous}" if previous else "as the first entry"
            edit = f"add `{yaml_name(column.name)}: {{source_type: {_quoted(live_type)}}}` {place}"
            if lost:
                edit = (f"if it is where {', '.join(lost)} went, rename that entry to it; "
                        f"else {edit}")
            self.add("columns", column.name, "added", "added in MySQL, not pinned", edit,
                     live_name=column.name, live_type=live_type, after=previous, where=at,
                     refreshable=not lost)
            previous = column.name


def plain_name(name: str) -> bool:
    """Whether a column name can be written as a plain YAML scalar."""
    return bool(_PLAIN.match(name)) and name.lower() not in _YAML_WORDS


def yaml_name(name: str) -> str:
    """A column name as YAML: plain when safe, else double-quoted."""
    return name if plain_name(name) else _quoted(name)


def _quoted(text: str) -> str:
    """A double-quoted YAML scalar, as `replicator init` writes a source_type."""
    return json.dumps(text, ensure_ascii=False)


def _placed(entry: StaleEntry, path: str | None, document: LoadedDocument | None) -> StaleEntry:
    """``entry`` with its file, and the line of the setting to edit when ``document`` is the
    file."""
    if document is None:
        return dataclasses.replace(entry, file=path)
    at = ("tables", entry.table_index, *entry.where)
    position = document.position(at) if isinstance(at[-1], int) else document.key_position(at)
    return dataclasses.replace(entry, file=path, line=position.line, col=position.col)


__all__ = ["REFRESH_COMMAND", "StaleContext", "StaleEntry", "comparable_type", "find_stale",
           "fully_pinned", "plain_name", "same_type", "stale_entries", "yaml_name"]
