"""A small, documented JSON path subset for outbox payloads (pure Python).

Grammar (docs/modes.md, "Outbox"):

    path     := "$" step*
    step     := "." name                 $.customer.id
              | "[" index "]"            $.lines[0]        (index: 0, 1, 2 ... from the start)
              | "[" quoted "]"           $['odd key'] or $["odd key"]
    name     := a letter or "_", then letters, digits or "_" (Unicode letters count)
    quoted   := '...' or "..." where \\ and the quote itself are escaped with a backslash

``$`` alone is the whole payload. There are no wildcards, filters, slices or negative
indexes: a path names exactly one place, so a column has exactly one value. Parsing happens
at ``validate`` time (``PathError`` carries the offset of the offending character). The
engine reads paths with DuckDB over a whole batch (``transform.outbox.json_path``: the same
places); ``evaluate`` reads one parsed payload (the value an error message shows).

A path that leads nowhere (a missing key, an index past the end, a key looked up in a list
or a number) yields ``MISSING``; the caller decides what that means (NULL for a column).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Step = str | int

_NAME = re.compile(r"(?!\d)\w+")
_INDEX = re.compile(r"\d+")


class PathError(ValueError):
    """A path outside the subset; ``offset`` is the index of the offending character."""

    def __init__(self, message: str, offset: int, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.hint = hint


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


@dataclass(frozen=True)
class JsonPath:
    text: str
    steps: tuple[Step, ...]

    def evaluate(self, document: Any) -> Any:
        return evaluate(self.steps, document)

    def __str__(self) -> str:
        return self.text


_HINT = "write $.name, $.name.inner, $.list[0] or $['key with spaces']"


def parse_path(text: str) -> JsonPath:
    """``$.a.b[0]['c d']`` -> JsonPath(steps=('a', 'b', 0, 'c d')); PathError otherwise."""
    if not isinstance(text, str) or not text.startswith("$"):
        raise PathError(f"JSON path {text!r} must start with $", 0, _HINT)
    steps: list[Step] = []
    at = 1
    while at < len(text):
        char = text[at]
        if char == ".":
            match = _NAME.match(text, at + 1)
            if match is None:
                what = "the end" if at + 1 >= len(text) else repr(text[at + 1])
                raise PathError(f"JSON path {text!r}: a name must follow '.', found {what}",
                                min(at + 1, len(text) - 1),
                                "names start with a letter or _; write other keys as $['key']")
            steps.append(match.group())
            at = match.end()
        elif char == "[":
            at = _bracket(text, at, steps)
        else:
            raise PathError(f"JSON path {text!r}: unexpected {char!r}", at, _HINT)
    return JsonPath(text, tuple(steps))


def _bracket(text: str, at: int, steps: list[Step]) -> int:
    inner = at + 1
    if inner < len(text) and text[inner] in "'\"":
        quote = text[inner]
        key: list[str] = []
        i = inner + 1
        while i < len(text):
            char = text[i]
            if char == "\\":
                if i + 1 < len(text) and text[i + 1] in ("\\", quote):
                    key.append(text[i + 1])
                    i += 2
                    continue
                raise PathError(f"JSON path {text!r}: only \\\\ and \\{quote} are escapes here",
                                i, f"write a backslash as \\\\ and the quote as \\{quote}")
            if char == quote:
                break
            key.append(char)
            i += 1
        else:
            raise PathError(f"JSON path {text!r}: the quoted key is not closed", inner,
                            f"close it: [{quote}key{quote}]")
        if i + 1 >= len(text) or text[i + 1] != "]":
            raise PathError(f"JSON path {text!r}: ']' must follow the quoted key", i + 1 if
                            i + 1 < len(text) else i, f"[{quote}key{quote}]")
        steps.append("".join(key))
        return i + 2
    match = _INDEX.match(text, inner)
    if match is None:
        found = repr(text[inner]) if inner < len(text) else "the end"
        raise PathError(f"JSON path {text!r}: '[' takes an index (0, 1, ...) or a quoted key, "
                        f"found {found}", min(inner, len(text) - 1),
                        "write $.list[0] or $['key']; negative indexes, * and slices are "
                        "not supported")
    end = match.end()
    if end >= len(text) or text[end] != "]":
        raise PathError(f"JSON path {text!r}: ']' must close the index", min(end, len(text) - 1),
                        "write $.list[0]")
    steps.append(int(match.group()))
    return end + 1


def evaluate(steps: tuple[Step, ...], document: Any) -> Any:
    """The value at ``steps`` in a parsed JSON document, or MISSING."""
    value = document
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return MISSING
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return MISSING
            value = value[step]
    return value


def format_steps(steps: tuple[Step, ...]) -> str:
    """The canonical text of a path (parse_path(format_steps(s)).steps == s)."""
    text = "$"
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        elif _NAME.fullmatch(step):
            text += "." + step
        else:
            text += "['" + step.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return text
