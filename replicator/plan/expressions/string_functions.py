"""The string and binary functions of the compiler: concat, concat_ws, upper/lower/initcap,
trims, length, substring/left/right, replace, regexp_replace, lpad/rpad, and the hashes (md5,
sha1, sha2) of a string's UTF-8 bytes or a BINARY value.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from replicator.plan.expressions.errors import fail_evaluation
from replicator.plan.expressions.java_patterns import java_regex, java_replacement
from replicator.plan.expressions.operators import OperatorCompiler
from replicator.plan.expressions.spark_types import (
    BINARY,
    INT,
    INT_MAX,
    STRING,
    Compiled,
    Row,
    compiled_constant,
)

MAX_PAD = 1 << 20  # characters: a padded column that large is a mistake, not data


class StringFunctions(OperatorCompiler):
    """Compiles ``fn_<name>`` of the string and binary functions (``OperatorCompiler`` does the rest)."""

    def function_concat(self, node: Any, args: list[Compiled]) -> Compiled:
        if args and all(a.type.kind == "binary" for a in args):
            def concat_bytes(row: Row) -> Any:
                values = [a(row) for a in args]
                return None if any(v is None for v in values) else b"".join(values)

            return Compiled(concat_bytes, BINARY)
        parts = [self.stringy(node, a) for a in args]

        def concat(row: Row) -> Any:
            values = [p(row) for p in parts]
            return None if any(v is None for v in values) else "".join(values)

        if all(p.constant for p in parts):
            return compiled_constant(concat({}), STRING)
        return Compiled(concat, STRING)

    def fn_concat(self, node: Any, args: list[Compiled]) -> Compiled:
        return self.function_concat(node, args)

    def fn_concat_ws(self, node: Any, args: list[Compiled]) -> Compiled:
        if not args:
            raise self.error(node, "concat_ws() needs a separator")
        parts = [self.stringy(node, a) for a in args]
        separator, rest = parts[0], parts[1:]

        def concat_ws(row: Row) -> Any:
            sep = separator(row)
            if sep is None:
                return None
            return sep.join(v for p in rest if (v := p(row)) is not None)

        return Compiled(concat_ws, STRING)

    def _string_map(self, node: Any, args: list[Compiled], method: Callable[[str], str]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.stringy(node, args[0])
        return Compiled(lambda row: None if (v := inner(row)) is None else method(v), STRING)

    def fn_upper(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, str.upper)

    def fn_lower(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, str.lower)

    fn_ucase, fn_lcase = fn_upper, fn_lower

    def fn_initcap(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, _initcap)

    def fn_ltrim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self.trimmed(self.stringy(node, args[0]), compiled_constant(" ", STRING), "LEADING")

    def fn_rtrim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self.trimmed(self.stringy(node, args[0]), compiled_constant(" ", STRING), "TRAILING")

    def fn_trim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self.trimmed(self.stringy(node, args[0]), compiled_constant(" ", STRING), "BOTH")

    def fn_length(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        inner = args[0] if args[0].type.kind == "binary" else self.stringy(node, args[0])
        return Compiled(lambda row: None if (v := inner(row)) is None else len(v), INT)

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2, 3)
        inner = self.stringy(node, args[0])
        start = self.integer(node, args[1], "the position")
        length = self.integer(node, args[2], "the length") if len(args) > 2 else compiled_constant(INT_MAX, INT)

        def substring(row: Row) -> Any:
            v, p, n = inner(row), start(row), length(row)
            if v is None or p is None or n is None:
                return None
            return _substring_sql(v, p, n)

        return Compiled(substring, STRING)

    fn_substr = fn_substring

    def fn_left(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        inner, count = self.stringy(node, args[0]), self.integer(node, args[1], "the length")

        def left(row: Row) -> Any:
            v, n = inner(row), count(row)
            if v is None or n is None:
                return None
            return "" if n <= 0 else _substring_sql(v, 1, n)

        return Compiled(left, STRING)

    def fn_right(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        inner, count = self.stringy(node, args[0]), self.integer(node, args[1], "the length")

        def right(row: Row) -> Any:
            v, n = inner(row), count(row)
            if v is None or n is None:
                return None
            return "" if n <= 0 else _substring_sql(v, -n, INT_MAX)

        return Compiled(right, STRING)

    def fn_replace(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2, 3)
        parts = [self.stringy(node, a) for a in args]
        if len(parts) == 2:
            parts.append(compiled_constant("", STRING))
        text, search, replacement = parts

        def replace(row: Row) -> Any:
            v, s, r = text(row), search(row), replacement(row)
            if v is None or s is None or r is None:
                return None
            return v if s == "" else v.replace(s, r)

        return Compiled(replace, STRING)

    def fn_regexp_replace(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 3)
        text = self.stringy(node, args[0])
        pattern, replacement = args[1], args[2]
        if not (pattern.constant and replacement.constant and pattern.type.kind == "string"
                and replacement.type.kind == "string"):
            raise self.error(node, "regexp_replace() needs literal pattern and replacement strings")
        regex = java_regex(pattern.value, self.error(node.expressions[1], "x"))
        template = java_replacement(replacement.value, regex, self.error(node.expressions[2], "x"))
        return Compiled(lambda row: None if (v := text(row)) is None else regex.sub(template, v), STRING)

    def _pad(self, node: Any, args: list[Compiled], left: bool) -> Compiled:
        self.arity(node, args, 2, 3)
        text = self.stringy(node, args[0])
        width = self.integer(node, args[1], "the length")
        fill = self.stringy(node, args[2]) if len(args) > 2 else compiled_constant(" ", STRING)

        def pad(row: Row) -> Any:
            v, n, f = text(row), width(row), fill(row)
            if v is None or n is None or f is None:
                return None
            if n <= 0:
                return ""
            if n > MAX_PAD:
                fail_evaluation("STRING_TOO_LONG", f"padding to {n} characters (replicator's limit: {MAX_PAD})")
            if len(v) >= n or not f:
                return v[:n]
            need = n - len(v)
            padding = (f * (need // len(f) + 1))[:need]
            return padding + v if left else v + padding

        return Compiled(pad, STRING)

    def fn_lpad(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._pad(node, args, True)

    def fn_rpad(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._pad(node, args, False)

    # hashes ------------------------------------------------------------------------------------
    def bytes_arg(self, node: Any, arg: Compiled) -> Compiled:
        if arg.type.kind == "binary":
            return arg
        if arg.type.kind in ("string", "null", "any"):
            fn = arg.fn
            return Compiled(lambda row: None if (v := fn(row)) is None else v.encode("utf-8"), BINARY)
        raise self.error(node, f"a string or binary value is expected, not {arg.type}",
                         hint="CAST(x AS STRING) first")
    def fn_sha2(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        data = self.bytes_arg(node, args[0])
        bits = self.constant_int(node, args[1], "the bit length")
        algorithm = {0: "sha256", 224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}.get(bits)
        if algorithm is None:
            return compiled_constant(None, STRING)  # Spark: NULL for an unsupported bit length
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.new(algorithm, v).hexdigest(), STRING)
    def fn_md5(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        data = self.bytes_arg(node, args[0])
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.md5(v).hexdigest(), STRING)
    def fn_sha1(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        data = self.bytes_arg(node, args[0])
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.sha1(v).hexdigest(), STRING)
    fn_sha = fn_sha1


def _substring_sql(text: str, pos: int, length: int) -> str:
    """Spark's UTF8String.substringSQL over code points."""
    size = len(text)
    start = pos - 1 if pos > 0 else (size + pos if pos < 0 else 0)
    end = start + length
    start = max(start, 0)
    if start >= end:
        return ""
    return text[start:end]


def _initcap(text: str) -> str:
    """Spark's initcap: each word (split at ' ') gets its first character title-cased (full
    mapping: 'ß' -> 'Ss') and the rest lower-cased."""
    out = []
    previous = " "
    for char in text:
        out.append(char.title() if previous == " " else char.lower())
        previous = char
    return "".join(out)
