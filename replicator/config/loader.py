"""Read a pipeline file into plain Python data, remembering where every node was written.

PyYAML's composer gives each node its line and column; we build the Python values from the
nodes ourselves so that we can keep a map from JSON path (``("tables", 0, "key", 1)``) to
position, reject duplicate keys (PyYAML silently keeps the last), notice YAML 1.1 booleans
(``on``/``yes``/``no``/``off``) and interpolate ``${VAR}`` with the reference's position.

Bad content is never an exception here: it becomes a ``Diagnostic``. Only a file that
cannot be read at all (missing, a directory, no permission) raises ``UsageError``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from replicator.config.diagnostics import Diagnostic
from replicator.config.interpolate import interpolate
from replicator.errors import UsageError

JsonPath = tuple[str | int, ...]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"
# Words YAML 1.1 (PyYAML, many CI tools) reads as booleans but YAML 1.2 and humans read as
# text; ``true``/``false`` are booleans everywhere and are not flagged.
_YAML11_ONLY_BOOLEANS = frozenset({"yes", "no", "on", "off", "y", "n"})
# C0 controls other than tab/newline/CR, and DEL: a sign of a binary file.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

# Limits that keep a hostile or broken file from eating memory or the stack (docs/diagnostics.md,
# R007). Real pipelines are far below them: 800 tables with 50 mapped columns each is 1.8 MB,
# about 300,000 values and 5 levels deep.
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 64  # nested mappings/lists (libyaml and the builder recurse per level)
MAX_VALUES = 1_000_000  # values after expanding aliases (`*anchor`): stops "billion laughs"


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    col: int  # 1-based


@dataclass
class LoadedDocument:
    """The file's data plus what the later checks need to point at the right place."""

    path: str
    data: Any = None  # None when the file held no usable mapping
    values: dict[JsonPath, Position] = field(default_factory=dict)  # where each value starts
    keys: dict[JsonPath, Position] = field(default_factory=dict)  # where its key starts
    diagnostics: list[Diagnostic] = field(default_factory=list)
    interpolated: set[JsonPath] = field(default_factory=set)  # values that used ${...}
    written: dict[JsonPath, str] = field(default_factory=dict)  # interpolated values as written
    expanded: dict[JsonPath, str] = field(default_factory=dict)  # ... and their text after it
    yaml11_booleans: dict[JsonPath, str] = field(default_factory=dict)  # path -> text as written
    quoted: dict[JsonPath, str] = field(default_factory=dict)  # scalars written in ' or "
    text: str | None = None  # the file's text (points inside a scalar: config.transforms)

    def position(self, path: JsonPath) -> Position:
        """Where the value at ``path`` starts, or its nearest ancestor that exists."""
        while path not in self.values and path:
            path = path[:-1]
        return self.values.get(path, Position(1, 1))

    def key_position(self, path: JsonPath) -> Position:
        """Where the key of ``path`` is written (the value's position for list items)."""
        return self.keys.get(path) or self.position(path)

    def add(
        self, position: Position, code: str, message: str, hint: str | None = None,
        severity: str = "error",
    ) -> None:
        self.diagnostics.append(Diagnostic(
            self.path, position.line, position.col, code, message, hint, severity  # type: ignore[arg-type]
        ))


def read_text(path: str | Path) -> bytes:
    """The file's bytes; ``UsageError`` (exit 2) when it cannot be read.

    Reads at most ``MAX_FILE_BYTES + 1`` bytes (a FIFO or ``/dev/zero`` too): a longer file is
    reported by ``load_document`` without being held in memory.
    """
    try:
        with Path(path).open("rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file", "check the path") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory", "give a .yaml file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror}") from None


def load_document(
    path: str | Path, *, environ: Mapping[str, str] | None = None, content: bytes | None = None
) -> LoadedDocument:
    raw = read_text(path) if content is None else content
    document = LoadedDocument(path=str(path))
    if len(raw) > MAX_FILE_BYTES:
        document.add(Position(1, 1), "R007",
                     f"the file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not read",
                     "a pipeline file is small: split it into several pipelines, or check "
                     "that this is the file you meant")
        return document
    text = _decode(raw, document)
    if text is None:
        return document
    if not _within_limits(text, document):
        return document
    document.text = text
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{problem} ({exc.context})"
        document.add(where, "R003", f"YAML syntax error: {problem}",
                     "check the indentation and quoting around this line")
        return document
    except yaml.YAMLError as exc:  # reader errors without a usable mark
        document.add(Position(1, 1), "R001", f"not a YAML text file: {exc}")
        return document
    if root is None:
        document.add(Position(1, 1), "R002", "the file holds no YAML document",
                     "start from an example in pipelines/ or `replicator init`")
        return document
    builder = _Builder(document, os.environ if environ is None else environ)
    data = builder.build(root, ())
    if not isinstance(data, dict):
        where = _position(root)
        document.add(where, "R004", f"the top level is a {_kind(root)}, not a mapping of settings",
                     "a pipeline file starts with keys such as `version: 1` and `tables:`")
        return document
    document.data = data
    return document


def _within_limits(text: str, document: LoadedDocument) -> bool:
    """False (with an R007) when the YAML nests too deep or its aliases expand too far.

    One pass over libyaml's event stream, before anything is built: it stops at the first
    level past ``MAX_DEPTH`` (libyaml's composer would overflow the C stack on ten thousand
    nested ``[``) and counts the values aliases would copy (``*a`` of a 10-item list of
    10-item lists... is a billion values from 1 KB). Syntax errors are left to the composer.
    """
    depth = 0
    total = 0  # values so far, aliases expanded
    open_anchors: list[tuple[str | None, int]] = []
    sizes: dict[str, int] = {}
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.AliasEvent):
                total += sizes.get(event.anchor, 1)
            elif isinstance(event, yaml.ScalarEvent):
                total += 1
                if event.anchor:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.CollectionStartEvent):
                total += 1
                depth += 1
                open_anchors.append((event.anchor, total))
                if depth > MAX_DEPTH:
                    document.add(_event_position(event), "R007",
                                 f"mappings and lists nest more than {MAX_DEPTH} levels deep",
                                 "a pipeline needs a handful of levels: check the brackets "
                                 "and indentation")
                    return False
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                anchor, start = open_anchors.pop()
                if anchor:
                    sizes[anchor] = total - start + 1
            else:
                continue
            if total > MAX_VALUES:
                document.add(_event_position(event), "R007",
                             f"the aliases (*name) expand the file to more than {MAX_VALUES:,} "
                             "values",
                             "an alias copies its anchor's whole value: write the settings "
                             "out, or use fewer nested aliases")
                return False
    except yaml.YAMLError:
        return True  # the composer reports it with its position
    return True


def _event_position(event: yaml.Event) -> Position:
    mark = event.start_mark
    return Position(mark.line + 1, mark.column + 1) if mark else Position(1, 1)


def _decode(raw: bytes, document: LoadedDocument) -> str | None:
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        document.add(Position(1, 1), "R001", "the file is UTF-16, not UTF-8",
                     "save it as UTF-8")
        return None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = _offset_position(raw[: exc.start].decode("utf-8", "replace"), len(
            raw[: exc.start].decode("utf-8", "replace")))
        document.add(where, "R001", f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x})",
                     "save it as UTF-8; a pipeline file is text, not binary")
        return None
    control = _CONTROL.search(text)
    if control:
        document.add(_offset_position(text, control.start()), "R001",
                     f"the file holds a control character (U+{ord(control.group()):04X}): "
                     "it looks binary, not YAML text",
                     "save it as plain UTF-8 text")
        return None
    if not text.strip():
        document.add(Position(1, 1), "R002", "the file is empty",
                     "start from an example in pipelines/ or `replicator init`")
        return None
    return text


def _offset_position(text: str, offset: int) -> Position:
    before = text[:offset]
    line = before.count("\n") + 1
    return Position(line, offset - (before.rfind("\n") + 1) + 1)


def _position(node: Node) -> Position:
    return Position(node.start_mark.line + 1, node.start_mark.column + 1)


def _kind(node: Node) -> str:
    if isinstance(node, SequenceNode):
        return "list"
    if isinstance(node, ScalarNode):
        return "plain value"
    return "mapping"


def _is_plain(node: ScalarNode) -> bool:
    # The C loader marks plain scalars with style '', the pure-Python one with None.
    return not node.style


class _Builder:
    """Turns composed nodes into dicts/lists/scalars, filling the document's maps."""

    def __init__(self, document: LoadedDocument, environ: Mapping[str, str]) -> None:
        self.document = document
        self.environ = environ
        self.constructor = yaml.constructor.SafeConstructor()
        self.resolver = yaml.resolver.Resolver()

    def build(self, node: Node, path: JsonPath) -> Any:
        self.document.values.setdefault(path, _position(node))
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        return self._scalar(node, path)  # type: ignore[arg-type]

    def _mapping(self, node: MappingNode, path: JsonPath) -> dict[str, Any]:
        result: dict[str, Any] = {}
        first_seen: dict[str, Position] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == f"{_TAG}merge":  # `<<: *anchor`
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    value = self.build(source, path)
                    if isinstance(value, dict):
                        merged = {**value, **merged}
                continue
            where = _position(key_node)
            if not isinstance(key_node, ScalarNode):
                self.document.add(where, "R003", "a key must be plain text, not a "
                                  + _kind(key_node), "write the key as a word: `name: value`")
                continue
            # Keys are names (of settings, columns, Spark options): keep them as written.
            key = str(key_node.value)
            if key_node.tag == f"{_TAG}bool" and key.lower() in _YAML11_ONLY_BOOLEANS:
                self.document.add(
                    where, "R006",
                    f"YAML 1.1 tools read the key `{key}` as a boolean; replicator reads the text "
                    f"{key!r}",
                    f"quote it so every tool agrees: '{key}':", severity="warning",
                )
            if key in first_seen:
                seen = first_seen[key]
                self.document.add(
                    where, "R005", f"duplicate key '{key}' (first at line {seen.line}, "
                    f"column {seen.col})",
                    "remove one of them: YAML would silently keep only the last",
                )
                continue
            first_seen[key] = where
            self.document.keys[(*path, key)] = where
            result[key] = self.build(value_node, (*path, key))
        for key, value in merged.items():
            result.setdefault(key, value)
        return result

    def _scalar(self, node: ScalarNode, path: JsonPath) -> Any:
        text = node.value
        plain = _is_plain(node)
        if node.style in ("'", '"'):
            self.document.quoted[path] = node.style
        if "$" in text and node.tag != f"{_TAG}binary":
            return self._interpolated(node, path)
        if node.tag == f"{_TAG}bool" and plain and text.lower() in _YAML11_ONLY_BOOLEANS:
            self.document.yaml11_booleans[path] = text
        if node.tag in (f"{_TAG}timestamp", f"{_TAG}binary"):
            return text  # dates and base64 mean nothing to us: keep the text
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError:
            return text

    def _interpolated(self, node: ScalarNode, path: JsonPath) -> Any:
        result = interpolate(node.value, self.environ)
        if result.references:
            self.document.interpolated.add(path)
            self.document.written[path] = node.value
            self.document.expanded[path] = result.value
        start = _position(node)
        plain = _is_plain(node)
        quote = 0 if plain else 1 if node.style in ("'", '"') else None
        for problem in result.problems:
            before = node.value[: problem.offset]
            if quote is not None and "\n" not in before:
                where = Position(start.line, start.col + quote + problem.offset)
            else:
                where = start  # block or folded scalar: point at its start
            self.document.add(where, problem.code, problem.message, problem.hint)
        if not plain:
            return result.value
        # A plain scalar reads like YAML once substituted: `port: ${PORT:-3306}` is an int.
        tag = self.resolver.resolve(ScalarNode, result.value, (True, False))
        if tag in (f"{_TAG}int", f"{_TAG}float") or (
            tag == f"{_TAG}bool" and result.value.lower() in ("true", "false")
        ):
            return self.constructor.construct_object(
                ScalarNode(tag, result.value, node.start_mark, node.end_mark)
            )
        return result.value
