"""The JVM's readings of pattern text that Spark uses, reproduced with Python's ``re`` and
``datetime``: LIKE patterns, Java regular expressions (the syntax both share; the rest is
refused) and their ``$n`` replacement templates, and datetime patterns (``yyyy-MM-dd``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from replicator.plan.expressions.errors import ExpressionError


def like_regex(pattern: str, bad_escape: Exception) -> re.Pattern[str]:
    """A Spark LIKE pattern as a regex for ``.match``: ``%`` any run, ``_`` one character;
    ``\\`` escapes only ``_ % \\``, and a pattern ending in a lone ``\\`` is an error."""
    out = []
    escaped = False
    for char in pattern:
        if escaped:
            if char not in "_%\\":
                raise bad_escape
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    if escaped:
        raise bad_escape
    # \Z, not $: '$' also matches before a trailing newline ('a\n' LIKE 'a' is false).
    return re.compile("".join(out) + r"\Z", re.DOTALL)


_JAVA_ONLY = re.compile(r"\\[pPQEGZRhHXvVk]|[*+?}]\+|\(\?<[A-Za-z]|\\0\d|\[\[|&&")


def java_regex(pattern: str, error: ExpressionError) -> re.Pattern[str]:
    """A Java regex whose meaning Python's ``re`` shares; other syntax is refused."""
    if _JAVA_ONLY.search(pattern):
        raise ExpressionError(f"regular expression {pattern!r} uses Java-only syntax",
                              error.offset, hint="use the common syntax: classes [..], \\d \\w \\s, "
                              "groups (..), quantifiers * + ? {n,m}, anchors ^ $")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ExpressionError(f"regular expression {pattern!r}: {exc}", error.offset,
                              hint="fix the regular expression") from None


def java_replacement(text: str, regex: re.Pattern[str], error: ExpressionError) -> Callable[[re.Match[str]], str]:
    """Java's Matcher replacement: $n is a group, \\x is x."""
    pieces: list[str | int] = []
    i = 0
    literal = []
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 >= len(text):
                raise ExpressionError("replacement ends with a lone backslash", error.offset)
            literal.append(text[i + 1])
            i += 2
        elif char == "$":
            j = i + 1
            if j >= len(text) or not text[j].isdigit():
                raise ExpressionError("'$' in a replacement must be followed by a group number "
                                      "(write \\$ for a dollar sign)", error.offset)
            number = int(text[j])
            j += 1
            while j < len(text) and text[j].isdigit() and int(text[i + 1:j + 1]) <= regex.groups:
                number = int(text[i + 1:j + 1])
                j += 1
            if number > regex.groups:
                raise ExpressionError(f"replacement refers to group {number}; the pattern has "
                                      f"{regex.groups}", error.offset)
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(number)
            i = j
        else:
            literal.append(char)
            i += 1
    if literal:
        pieces.append("".join(literal))

    def replace(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in pieces)

    return replace


_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def date_formatter(pattern: str) -> Callable[[dt.datetime], str]:
    """Spark's datetime pattern (a subset) -> a formatting function."""
    parts: list[Callable[[dt.datetime], str]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError("unterminated quote in the date pattern")
            text = pattern[i + 1:end] or "'"
            parts.append(lambda v, t=text: t)
            i = end + 1
            continue
        if not char.isalpha():
            parts.append(lambda v, t=char: t)
            i += 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == char:
            j += 1
        count = j - i
        parts.append(_date_field(char, count))
        i = j
    return lambda v: "".join(part(v) for part in parts)


def _date_field(char: str, count: int) -> Callable[[dt.datetime], str]:
    def number(get: Callable[[dt.datetime], int], width_max: int) -> Callable[[dt.datetime], str]:
        if count > width_max:
            raise ValueError(f"too many pattern letters: {char * count}")
        return lambda v: f"{get(v):0{count}d}"

    if char == "y":
        if count == 2:
            return lambda v: f"{v.year % 100:02d}"
        return lambda v: f"{v.year:0{count}d}"
    if char == "M":
        if count == 3:
            return lambda v: _MONTHS[v.month - 1][:3]
        if count == 4:
            return lambda v: _MONTHS[v.month - 1]
        return number(lambda v: v.month, 2)
    if char == "d":
        return number(lambda v: v.day, 2)
    if char == "H":
        return number(lambda v: v.hour, 2)
    if char == "h":
        return number(lambda v: v.hour % 12 or 12, 2)
    if char == "m":
        return number(lambda v: v.minute, 2)
    if char == "s":
        return number(lambda v: v.second, 2)
    if char == "S":
        if count > 6:
            raise ValueError("at most 6 fraction digits (SSSSSS)")
        return lambda v: f"{v.microsecond:06d}"[:count]
    if char == "E":
        if count <= 3:
            return lambda v: _DAYS[v.weekday()][:3]
        if count == 4:
            return lambda v: _DAYS[v.weekday()]
        raise ValueError(f"too many pattern letters: {char * count}")
    if char == "a":
        if count > 1:
            raise ValueError("too many pattern letters: " + char * count)
        return lambda v: "AM" if v.hour < 12 else "PM"
    raise ValueError(f"date pattern letter {char!r} is not supported")
