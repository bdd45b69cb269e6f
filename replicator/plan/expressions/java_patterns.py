"""Checks of the pattern text a user writes for Spark's JVM readings: LIKE patterns, Java
regular expressions (the syntax Python's ``re`` shares; the rest is refused) and their ``$n``
replacement templates, and datetime patterns (``yyyy-MM-dd``). Nothing is matched here: the
engine runs the patterns (``plan.transpile``).
"""

from __future__ import annotations

import re

from replicator.plan.expressions.errors import ExpressionError


def check_like(pattern: str, bad_escape: Exception) -> None:
    """A Spark LIKE pattern: ``\\`` escapes only ``_ % \\``, and a lone ``\\`` at the end is
    an error."""
    escaped = False
    for char in pattern:
        if escaped:
            if char not in "_%\\":
                raise bad_escape
            escaped = False
        elif char == "\\":
            escaped = True
    if escaped:
        raise bad_escape


_JAVA_ONLY = re.compile(r"\\[pPQEGZRhHXvVk]|[*+?}]\+|\(\?<[A-Za-z]|\\0\d|\[\[|&&")


def check_java_regex(pattern: str, error: ExpressionError) -> int:
    """A Java regex whose meaning Python's ``re`` shares -> its number of groups; other
    syntax is refused."""
    if _JAVA_ONLY.search(pattern):
        raise ExpressionError(f"regular expression {pattern!r} uses Java-only syntax",
                              error.offset, hint="use the common syntax: classes [..], \\d \\w \\s, "
                              "groups (..), quantifiers * + ? {n,m}, anchors ^ $")
    try:
        return re.compile(pattern).groups
    except re.error as exc:
        raise ExpressionError(f"regular expression {pattern!r}: {exc}", error.offset,
                              hint="fix the regular expression") from None


def check_replacement(text: str, groups: int, error: ExpressionError) -> None:
    """Java's Matcher replacement: $n is a group (of the ``groups`` there are), \\x is x."""
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 >= len(text):
                raise ExpressionError("replacement ends with a lone backslash", error.offset)
            i += 2
        elif char == "$":
            j = i + 1
            if j >= len(text) or not text[j].isdigit():
                raise ExpressionError("'$' in a replacement must be followed by a group number "
                                      "(write \\$ for a dollar sign)", error.offset)
            number = int(text[j])
            j += 1
            while j < len(text) and text[j].isdigit() and int(text[i + 1:j + 1]) <= groups:
                number = int(text[i + 1:j + 1])
                j += 1
            if number > groups:
                raise ExpressionError(f"replacement refers to group {number}; the pattern has "
                                      f"{groups}", error.offset)
            i = j
        else:
            i += 1


# pattern letter -> the most letters Spark's formatter takes in a run (None: any)
_LETTERS = {"y": None, "M": 4, "d": 2, "H": 2, "h": 2, "m": 2, "s": 2, "S": 6, "E": 4, "a": 1}


def check_date_pattern(pattern: str) -> None:
    """Spark's datetime pattern (the subset supported): ValueError says what is wrong."""
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError("unterminated quote in the date pattern")
            i = end + 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == char:
            j += 1
        if char.isalpha():
            if char not in _LETTERS:
                raise ValueError(f"date pattern letter {char!r} is not supported")
            most = _LETTERS[char]
            if most is not None and j - i > most:
                raise ValueError("at most 6 fraction digits (SSSSSS)" if char == "S"
                                 else f"too many pattern letters: {char * (j - i)}")
        i = j
