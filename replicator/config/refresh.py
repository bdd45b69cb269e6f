"""``replicator init --refresh``: a pipeline file's stale entries (``config.stale``) rewritten
in place, everything else kept byte for byte.

The file is read and written by ruamel.yaml's round-trip mode, which keeps comments, key
order, quoting and flow/block style; only the nodes of the stale entries change:

- a renamed column's entry gets the new key in the same position, its settings and comments
  kept (a pin and a binding entry alike: the run already applies its settings to the column
  under its new name); a renamed ``key:`` / ``track_history:`` item is rewritten in place;
- a dropped column's entry is removed, a binding one too: since the drop the run applies its
  settings to nothing (``model.followed.with_followed`` leaves it out), and kept it would make
  ``plan --offline`` plan a column MySQL lacks and the live plan stop (R302) once the
  checkpoint that remembers the drop is gone. The change list names the settings removed.
  Full-line comments below a removed entry stay (they may describe the next one); only the
  entry's own lines go. A dropped ``track_history`` item is removed from the list;
- a retyped entry's ``source_type`` is written as MySQL's normalized form, in the quoting the
  file used for it;
- an added column of a fully pinned table is pinned right after the entry of the column before
  it in MySQL (``{source_type: "..."}``, as ``replicator init`` writes it).

Entries whose fix is not known (``blocking``: a binding entry whose column is gone without a
followed rename or drop) are never written: they are returned for a human to edit.

ruamel.yaml writes one indentation for the whole file, so the file's is found by trying the
usual ones until a write of the unchanged file gives the file back byte for byte; a file no
setting reproduces (mixed indentation) is refused with the edits to make by hand, never
reformatted.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString
from ruamel.yaml.tokens import CommentToken

from replicator.config.stale import StaleEntry, plain_name
from replicator.errors import ReplicatorError

# A source_type written plain only when it is one of these (no comma: a flow mapping's
# separator; no quote or colon).
_PLAIN_TYPE = re.compile(r"^[a-z][a-z0-9_ ()]*$")


class RefreshError(ReplicatorError):
    """The file cannot be rewritten without changing what is not stale."""


@dataclass(frozen=True)
class Refreshed:
    text: str  # the file with the refreshable stale entries rewritten
    applied: tuple[StaleEntry, ...]  # what was rewritten
    left: tuple[StaleEntry, ...]  # what needs a human's edit (``StaleEntry.blocking`` ...)


def refresh_text(text: str, entries: Sequence[StaleEntry]) -> Refreshed:
    """``text`` (a pipeline file) with ``entries`` (its ``find_stale``) rewritten."""
    applied = tuple(e for e in entries if e.refreshable)
    left = tuple(e for e in entries if not e.refreshable)
    if not applied:
        return Refreshed(text, (), left)
    yaml = _round_trip(text)
    data = yaml.load(text)
    for index in sorted({e.table_index for e in applied}):
        table = data["tables"][index]
        mine = [e for e in applied if e.table_index == index]
        _refresh_columns(table, [e for e in mine if e.section == "columns"])
        for section in ("key", "track_history"):
            _refresh_names(table, section, [e for e in mine if e.section == section])
        for entry in mine:
            if entry.section == "primary_key" and entry.live_key:
                _refresh_primary_key(table, entry.live_key)
    return Refreshed(_dump(yaml, data), applied, left)


# -- the file's layout -------------------------------------------------------------------------

_BLOCK_KEY = re.compile(r"^( *)[^\s#-][^#]*:\s*(#.*)?$")  # `key:` opening a block
_INDENTED = re.compile(r"^( *)(- +)?\S")


def _guessed_layout(text: str) -> tuple[int, int, int] | None:
    """The (mapping, sequence, offset) indents the file's first nested mapping and first
    block list show, when it has both."""
    mapping = sequence = offset = None
    lines = [line for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    for parent, child in itertools.pairwise(lines):
        opened, nested = _BLOCK_KEY.match(parent), _INDENTED.match(child)
        if not opened or not nested:
            continue
        depth = len(nested.group(1)) - len(opened.group(1))
        if nested.group(2) and offset is None:
            offset, sequence = depth, depth + len(nested.group(2))
        elif not nested.group(2) and mapping is None and depth > 0:
            mapping = depth
    if mapping is None or sequence is None or offset is None:
        return None
    return mapping, sequence, offset


def _layouts(text: str) -> Iterator[tuple[int, int, int]]:
    """(mapping, sequence, offset) indents to try: the file's own as it looks, then two-space
    files with indented dashes (what `replicator init` writes), then the other usual ones."""
    guessed = _guessed_layout(text)
    seen = set()
    if guessed is not None:
        seen.add(guessed)
        yield guessed
    for mapping in (2, 4, 3):
        for offset in range(0, mapping + 1):
            for sequence in (offset + 2, mapping, offset + mapping):
                if sequence > offset and (mapping, sequence, offset) not in seen:
                    seen.add((mapping, sequence, offset))
                    yield mapping, sequence, offset


def _yaml(mapping: int, sequence: int, offset: int, explicit_start: bool) -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 1 << 30  # never fold a long line
    yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
    yaml.explicit_start = explicit_start
    return yaml


def _round_trip(text: str) -> YAML:
    """The ruamel.yaml settings that write ``text`` back unchanged."""
    explicit_start = text.lstrip().startswith("---")
    for layout in _layouts(text):
        yaml = _yaml(*layout, explicit_start=explicit_start)
        try:
            if _dump(yaml, yaml.load(text)) == text:
                return yaml
        except YAMLError:  # a layout ruamel.yaml cannot write: try the next one
            continue
    raise RefreshError(
        "the pipeline file cannot be rewritten without reformatting lines that are not stale "
        "(its indentation is not one ruamel.yaml writes back unchanged)",
        hint="make the edits by hand: `replicator check PIPELINE.yaml` lists each with its "
        "line; or indent the file consistently (2 spaces, list dashes indented) and refresh",
    )


def _dump(yaml: YAML, data: Any) -> str:
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()


# -- columns: ----------------------------------------------------------------------------------

@dataclass
class _Item:
    """One entry of a `columns:` mapping while it is rebuilt: key, value and its comments
    (the mapping's ``ca.items`` slot of the key)."""

    key: Any
    value: Any
    comment: list[Any] | None


def _refresh_columns(table: CommentedMap, entries: list[StaleEntry]) -> None:
    if not entries:
        return
    columns = table.get("columns")
    if not isinstance(columns, CommentedMap):
        return  # nothing declared: nothing stale in `columns:` (added needs a pinned table)
    by_name: dict[str, list[StaleEntry]] = {}
    for entry in entries:
        if entry.kind != "added":
            by_name.setdefault(entry.declared.lower(), []).append(entry)
    items: list[_Item] = []
    dropped_first: list[str] = []  # comment lines below a removed first entry
    for key in list(columns):
        item = _Item(key, columns[key], columns.ca.items.get(key))
        changes = by_name.get(str(key).lower(), [])
        if any(e.kind == "dropped" for e in changes):
            rest = _take_tail(item, keep_eol=False)
            if rest:
                if items:
                    _append_tail(items[-1], rest)
                else:
                    dropped_first.append(rest)
            continue
        key_delta = type_delta = 0
        for entry in changes:
            if entry.kind == "retyped" and entry.live_type is not None:
                type_delta = _with_source_type(item.value, entry.live_type)
            elif entry.kind == "renamed" and entry.live_name is not None:
                old, item.key = item.key, _renamed_scalar(item.key, entry.live_name)
                key_delta = _width(item.key) - _width(old)
        # An end-of-line comment keeps its distance from the text it follows.
        if isinstance(item.value, CommentedMap) and not item.value.fa.flow_style():
            _shift(item.comment, 2, key_delta)
            _shift(item.value.ca.items.get("source_type"), 2, type_delta)
        else:
            _shift(item.comment, 2, key_delta + type_delta)
        items.append(item)
    for entry in entries:
        if entry.kind == "added" and entry.live_name and entry.live_type:
            _insert_added(items, entry)
    if dropped_first:
        _keep_above_first(table, columns, "".join(dropped_first))
    _replace_items(columns, items)


def _insert_added(items: list[_Item], entry: StaleEntry) -> None:
    """The pin of an added column right after its predecessor's entry: the full-line comments
    below that entry move below the new one (they introduce what followed it)."""
    assert entry.live_name is not None and entry.live_type is not None
    position = 0  # no column before it in MySQL: first
    if entry.after is not None:
        names = [str(item.key).lower() for item in items]
        after = entry.after.lower()
        position = names.index(after) + 1 if after in names else len(items)
    pin = CommentedMap()
    pin["source_type"] = DoubleQuotedScalarString(entry.live_type)
    pin.fa.set_flow_style()
    key = entry.live_name if plain_name(entry.live_name) else DoubleQuotedScalarString(entry.live_name)
    added = _Item(key, pin, None)
    if position > 0:
        rest = _take_tail(items[position - 1], keep_eol=True)
        if rest:
            _append_tail(added, rest)
    items.insert(position, added)


def _replace_items(columns: CommentedMap, items: list[_Item]) -> None:
    """``columns`` holding ``items`` in order: the same mapping object, so its own comments and
    flow/block style stay."""
    for key in list(columns):
        del columns[key]
    columns.ca.items.clear()
    for item in items:
        columns[item.key] = item.value
        if item.comment is not None and any(c is not None for c in item.comment):
            columns.ca.items[item.key] = item.comment


def _keep_above_first(table: CommentedMap, columns: CommentedMap, lines: str) -> None:
    """Comment lines that stood below a removed first entry: below the `columns:` line (its
    comment token is the table's for the key and the mapping's own, one object)."""
    token = (table.ca.items.get("columns") or [None] * 4)[2]
    if token is None:
        token = CommentToken("\n", start_mark=CommentMark(0))
        table.ca.items["columns"] = [None, None, token, None]
        columns.ca.comment = [token, None]
    token.value = token.value + lines


# -- comment tokens below an entry -----------------------------------------------------------
#
# ruamel.yaml keeps the comment after a `key: value` line, with every full-line comment and
# blank line below it up to the next key, as one token in the mapping's ``ca.items[key][2]``
# (in a block value's last key when the value is a block mapping or list; index 0 for a list
# item): "# eol comment\n      # next entry's comment\n", or "\n..." without an eol comment.

def _tail_slot(item: _Item) -> tuple[list[Any], int]:
    """The comment slot below ``item``'s last line, created empty when missing."""
    nested = _last_block_slot(item.value)
    if nested is not None:
        return nested
    if item.comment is None:
        item.comment = [None, None, None, None]
    return item.comment, 2


def _last_block_slot(value: Any) -> tuple[list[Any], int] | None:
    if isinstance(value, CommentedMap) and value and not value.fa.flow_style():
        last = list(value)[-1]
        return _last_block_slot(value[last]) or (
            value.ca.items.setdefault(last, [None, None, None, None]), 2)
    if isinstance(value, CommentedSeq) and value and not value.fa.flow_style():
        last = len(value) - 1
        return _last_block_slot(value[last]) or (value.ca.items.setdefault(last, [None, None]), 0)
    return None


def _take_tail(item: _Item, *, keep_eol: bool) -> str:
    """The full-line comments and blank lines below ``item``, taken off it; its end-of-line
    comment stays (``keep_eol``) or goes with the entry."""
    slot, index = _tail_slot(item)
    token = slot[index]
    if token is None:
        return ""
    eol, _, rest = token.value.partition("\n")
    if keep_eol and eol:
        token.value = eol + "\n"
    else:
        slot[index] = None
    return rest


def _append_tail(item: _Item, lines: str) -> None:
    """``lines`` (full-line comments, blank lines) below ``item``."""
    slot, index = _tail_slot(item)
    token = slot[index]
    if token is None:
        slot[index] = CommentToken("\n" + lines, start_mark=CommentMark(0))
    else:
        token.value = token.value + lines


# -- scalars in the file's own style ------------------------------------------------------------

def _renamed_scalar(old: Any, name: str) -> Any:
    """``name`` in the quoting ``old`` was written in (plain only where plain is safe)."""
    if isinstance(old, SingleQuotedScalarString):
        return SingleQuotedScalarString(name)
    if isinstance(old, DoubleQuotedScalarString) or not plain_name(name):
        return DoubleQuotedScalarString(name)
    return name


def _with_source_type(value: Any, mysql_type: str) -> int:
    """``source_type: mysql_type`` in an entry's value, quoted as the old one was; how much
    longer its text got."""
    if not isinstance(value, CommentedMap):
        return 0  # not a mapping: validate reports it
    old = value.get("source_type")
    new: Any
    if isinstance(old, SingleQuotedScalarString):
        new = SingleQuotedScalarString(mysql_type)
    elif isinstance(old, DoubleQuotedScalarString) or not _PLAIN_TYPE.match(mysql_type):
        new = DoubleQuotedScalarString(mysql_type)
    else:
        new = mysql_type
    value["source_type"] = new
    return _width(new) - _width(old if old is not None else "")


def _width(scalar: Any) -> int:
    """How many characters ``scalar`` takes in the file, quotes included."""
    text = str(scalar)
    if isinstance(scalar, SingleQuotedScalarString):
        return len(text.replace("'", "''")) + 2
    if isinstance(scalar, DoubleQuotedScalarString):
        return len(json.dumps(text, ensure_ascii=False))
    return len(text)


def _shift(slot: list[Any] | None, index: int, delta: int) -> None:
    """The end-of-line comment in ``slot[index]`` moved by ``delta`` columns (its line's text
    before it got ``delta`` characters longer)."""
    token = slot[index] if slot is not None and len(slot) > index else None
    if delta and token is not None and token.value.startswith("#"):
        token.start_mark.column = max(0, token.start_mark.column + delta)


# -- key: and track_history: --------------------------------------------------------------------

def _refresh_names(table: CommentedMap, section: str, entries: list[StaleEntry]) -> None:
    names = table.get(section)
    if not entries or not isinstance(names, list):
        return
    removed = []
    flow = isinstance(names, CommentedSeq) and names.fa.flow_style()
    for entry in entries:
        position = entry.index
        if position is None or position >= len(names) or str(names[position]) != entry.declared:
            continue  # the file changed since it was read: leave it
        if entry.kind == "renamed" and entry.live_name is not None:
            old = names[position]
            names[position] = _renamed_scalar(old, entry.live_name)
            delta = _width(names[position]) - _width(old)
            if flow:  # `key: [id]   # comment`: the comment is the table's, after the list
                _shift(table.ca.items.get(section), 2, delta)
            elif isinstance(names, CommentedSeq):
                _shift(names.ca.items.get(position), 0, delta)
        elif entry.kind == "dropped":
            removed.append(position)
    for position in sorted(removed, reverse=True):
        del names[position]


def _refresh_primary_key(table: CommentedMap, live_key: tuple[str, ...]) -> None:
    """The `primary_key:` pin holding MySQL's primary key, its items quoted as the first one
    was; the end-of-line comment of a flow list keeps its distance."""
    names = table.get("primary_key")
    if not isinstance(names, CommentedSeq) or not names:
        return
    style = names[0]
    old_width, old_count = sum(_width(n) for n in names), len(names)
    for position, name in enumerate(live_key):
        value = _renamed_scalar(style, name)
        if position < len(names):
            names[position] = value
        else:
            names.append(value)
    while len(names) > len(live_key):
        del names[len(names) - 1]
    if names.fa.flow_style():
        separators = 2 * (len(live_key) - old_count)  # ", " between items
        delta = sum(_width(n) for n in names) - old_width + separators
        _shift(table.ca.items.get("primary_key"), 2, delta)


def describe(entry: StaleEntry) -> str:
    """One line of ``init --refresh``'s change list."""
    where = f"{entry.source_table} {entry.setting}"
    if entry.kind == "renamed":
        return f"{where}: renamed to {entry.live_name}"
    if entry.kind == "retyped":
        return f"{where}: source_type {json.dumps(entry.live_type)}"
    if entry.kind == "changed":
        return f"{entry.source_table} primary_key: [{', '.join(entry.live_key or ())}]"
    if entry.kind == "added":
        after = f"after {entry.after}" if entry.after else "first"
        return f"{entry.source_table} columns.{entry.live_name}: pinned ({entry.live_type}), {after}"
    if entry.section != "columns":
        return f"{where}: {entry.declared} removed ({entry.problem})"
    return f"{where}: removed" + (" with its settings" if entry.binding else "") + (
        f" ({entry.problem})")


__all__ = ["RefreshError", "Refreshed", "describe", "refresh_text"]
