"""The string and binary functions in DuckDB: concat_ws, upper and lower (with Java's
one-to-many case mappings DuckDB lacks), length and substring of BINARY, replace,
regexp_replace (where Java's and RE2's regexes agree), lpad/rpad, and the hashes; concat,
the trims, length, substring, left and right are ``base``'s.
"""

from __future__ import annotations

import re
from typing import Any

from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.transpile.casts import string_literal
from replicator.plan.transpile.operators import OperatorTranslator


class StringFunctions(OperatorTranslator):
    """Translates ``fn_<name>`` of the string and binary functions (``OperatorTranslator`` does the rest)."""

    def fn_concat_ws(self, node: Any, args: list[Any], result: SparkType) -> str:
        separator, rest = args[0], args[1:]
        if not rest:
            return f"CASE WHEN {self.string_arg(separator)} IS NOT NULL THEN '' END"
        return f"concat_ws({', '.join(self.string_arg(a) for a in args)})"

    def fn_upper(self, node: Any, args: list[Any], result: SparkType) -> str:
        return _upper(self.string_arg(args[0]))

    def fn_lower(self, node: Any, args: list[Any], result: SparkType) -> str:
        return _lower(self.string_arg(args[0]))

    fn_ucase, fn_lcase = fn_upper, fn_lower

    def fn_length(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            return f"CAST(octet_length({self.sql(args[0])}) AS INTEGER)"
        return super().fn_length(node, args, result)

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            raise self.fail(node, "substring() of BINARY")
        return super().fn_substring(node, args, result)

    fn_substr = fn_substring

    def fn_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, search = self.string_arg(args[0]), self.string_arg(args[1])
        replacement = self.string_arg(args[2]) if len(args) > 2 else "''"
        return f"replace({text}, {search}, {replacement})"

    def fn_regexp_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, pattern = self.constant(args[1])
        constant2, replacement = self.constant(args[2]) if len(args) > 2 else (True, "")
        if len(args) != 3 or not (constant and constant2) or pattern is None or replacement is None:
            raise self.fail(node, "regexp_replace() with a non-literal pattern or replacement")
        if re.search(r"\\[dDwWsSbB]|\(\?|\\[0-9]", pattern) or "\\" in replacement:
            raise self.fail(node, "this regexp_replace() pattern (Java and RE2 regexes differ here)")
        if "$" in replacement.replace("$$", "") and not re.fullmatch(r"([^$]|\$\d)*", replacement):
            raise self.fail(node, "a replacement with '$' that is no group reference")
        groups = re.sub(r"\$(\d)", r"\\\1", replacement)
        return f"regexp_replace({self.string_arg(args[0])}, {string_literal(pattern)}, {string_literal(groups)}, 'g')"

    def _pad(self, function: str, args: list[Any]) -> str:
        text, size = self.string_arg(args[0]), self.count_arg(args[1])
        pad = self.string_arg(args[2]) if len(args) > 2 else "' '"
        return (f"CASE WHEN {text} IS NULL OR {size} IS NULL OR {pad} IS NULL THEN NULL "
                f"WHEN {size} <= 0 THEN '' WHEN {pad} = '' THEN left({text}, {size}) "
                f"ELSE {function}({text}, {size}, {pad}) END")

    def fn_lpad(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._pad("lpad", args)

    def fn_rpad(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._pad("rpad", args)

    # hashes ------------------------------------------------------------------------------------
    def fn_sha2(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, bits = self.constant(args[1])
        if not constant or bits not in (256, 0):
            raise self.fail(node, "sha2() other than sha2(x, 256)")
        return f"sha256({self.binary_arg(args[0])})"
    def fn_md5(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"md5({self.binary_arg(args[0])})"
    def fn_sha1(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"sha1({self.binary_arg(args[0])})"
    fn_sha = fn_sha1


def _special_upper() -> dict[str, str]:
    """Characters whose upper case is not one character (Java and Python: 'ß' -> 'SS');
    DuckDB maps them one to one. 102 characters in Unicode 15, all in U+00DF..U+FB17 (the
    scan is kept to that range: the whole of Unicode takes seconds on a busy machine)."""
    global _SPECIAL_UPPER
    if _SPECIAL_UPPER is None:
        _SPECIAL_UPPER = {chr(c): chr(c).upper() for c in range(0x00DF, 0xFB18)
                          if not 0xD800 <= c <= 0xDFFF and len(chr(c).upper()) > 1}
    return _SPECIAL_UPPER


_SPECIAL_UPPER: dict[str, str] | None = None


def _upper(sql: str) -> str:
    specials = _special_upper()
    replaced = sql
    for char, upper in specials.items():
        replaced = f"replace({replaced}, {string_literal(char)}, {string_literal(upper)})"
    pattern = "[" + "".join(specials) + "]"
    return (f"CASE WHEN regexp_matches({sql}, {string_literal(pattern)}) THEN upper({replaced}) "
            f"ELSE upper({sql}) END")


def _lower(sql: str) -> str:
    # Java and Python: 'İ' -> 'i̇' (two characters), and a final capital sigma -> 'ς'.
    sigma = f"regexp_replace({sql}, '(\\pL\\pM*)Σ(\\PL|$)', '\\1ς\\2', 'g')"
    return (f"CASE WHEN regexp_matches({sql}, '[İΣ]') THEN lower(replace({sigma}, 'İ', 'i̇')) "
            f"ELSE lower({sql}) END")
