"""The types of the string and binary functions: concat, concat_ws, upper/lower/initcap,
trims, length, substring/left/right, replace, regexp_replace, lpad/rpad, and the hashes (md5,
sha1, sha2) of a string's UTF-8 bytes or a BINARY value.
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.java_patterns import check_java_regex, check_replacement
from replicator.plan.expressions.operators import OperatorChecker
from replicator.plan.expressions.spark_types import BINARY, INT, STRING, Typed, literal


class StringFunctions(OperatorChecker):
    """Checks ``fn_<name>`` of the string and binary functions (``OperatorChecker`` does the rest)."""

    def function_concat(self, node: Any, args: list[Typed]) -> Typed:
        if args and all(a.type.kind == "binary" for a in args):
            return Typed(BINARY)
        for arg in args:
            self.stringy(node, arg)
        return Typed(STRING)

    def fn_concat(self, node: Any, args: list[Typed]) -> Typed:
        return self.function_concat(node, args)

    def fn_concat_ws(self, node: Any, args: list[Typed]) -> Typed:
        if not args:
            raise self.error(node, "concat_ws() needs a separator")
        for arg in args:
            self.stringy(node, arg)
        return Typed(STRING)

    def _string_map(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        self.stringy(node, args[0])
        return Typed(STRING)

    fn_upper = fn_lower = fn_ucase = fn_lcase = fn_initcap = _string_map
    fn_ltrim = fn_rtrim = fn_trim = _string_map

    def fn_length(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        if args[0].type.kind != "binary":
            self.stringy(node, args[0])
        return Typed(INT)

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2, 3)
        self.stringy(node, args[0])
        self.integer(node, args[1], "the position")
        if len(args) > 2:
            self.integer(node, args[2], "the length")
        return Typed(STRING)

    fn_substr = fn_substring

    def fn_left(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        self.stringy(node, args[0])
        self.integer(node, args[1], "the length")
        return Typed(STRING)

    fn_right = fn_left

    def fn_replace(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2, 3)
        for arg in args:
            self.stringy(node, arg)
        return Typed(STRING)

    def fn_regexp_replace(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 3)
        self.stringy(node, args[0])
        pattern, replacement = args[1], args[2]
        if not (pattern.literal and replacement.literal and pattern.type.kind == "string"
                and replacement.type.kind == "string"):
            raise self.error(node, "regexp_replace() needs literal pattern and replacement strings")
        groups = check_java_regex(pattern.value, self.error(node.expressions[1], "x"))
        check_replacement(replacement.value, groups, self.error(node.expressions[2], "x"))
        return Typed(STRING)

    def _pad(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2, 3)
        self.stringy(node, args[0])
        self.integer(node, args[1], "the length")
        if len(args) > 2:
            self.stringy(node, args[2])
        return Typed(STRING)

    fn_lpad = fn_rpad = _pad

    # hashes ------------------------------------------------------------------------------------
    def bytes_arg(self, node: Any, arg: Typed) -> None:
        if arg.type.kind not in ("binary", "string", "null", "any"):
            raise self.error(node, f"a string or binary value is expected, not {arg.type}",
                             hint="CAST(x AS STRING) first")

    def fn_sha2(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        self.bytes_arg(node, args[0])
        bits = self.constant_int(node, args[1], "the bit length")
        if bits not in (0, 224, 256, 384, 512):
            return literal(None, STRING)  # Spark: NULL for an unsupported bit length
        return Typed(STRING)

    def _digest(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        self.bytes_arg(node, args[0])
        return Typed(STRING)

    fn_md5 = fn_sha1 = fn_sha = _digest
