"""The statement that flattens an outbox route's rows (``transform.outbox`` runs it).

Per row of the route (the view ``outbox_rows``): the payload's problem, each column's value
converted by the rules of docs/modes.md#outbox and, where the value breaks one, the reason
(the words of the error), and whether ``delete_when`` deletes the key. Everything is SQL
over the whole batch:

- each document is parsed once for all paths (``json_extract(d, [paths])``); a value's JSON
  type is ``json_type``;
- numbers keep every digit: DuckDB's JSON reader holds a fractional number as a DOUBLE, so
  where a value needs its exact text, the payload is first *marked*: every number token
  becomes a string ``"N<its text>"`` and every string one ``"S<its text>"`` (``ob_mark``:
  one regexp_replace over the JSON text), read at the marked path, and JSON text is unmarked
  again (``ob_unmark``); exact decimal arithmetic then runs on the digits as text
  (``ob_parts``: sign, coefficient, exponent);
- a column of the outbox row converts as a table column's declared type converts it
  (``transform.columns.convert``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from replicator.model import change_batch as cb
from replicator.model.jsonpath import parse_path
from replicator.transform.columns import convert, q

if TYPE_CHECKING:
    from replicator.plan.model import OutboxPlan, PlannedColumn, TablePlan
    from replicator.plan.types import TargetType

# Python's str.strip() whitespace (str.isspace), which the rules' "text" trims.
_WS = r"[\t\n\x0b\x0c\r\x1c-\x1f \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}]"
JSON_STRING = r'"(?:[^"\\]|\\.)*"'
_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
# What DuckDB's JSON reader accepts beyond RFC 8259 (outside strings): NaN and infinities,
# a trailing comma.
_LENIENT = r"(?i:nan|inf)|,[ \t\n\r]*[\]}]"
# ISO 8601 as Python's datetime.fromisoformat (3.11) reads it: a date, then any one character
# and a time (HH[:MM[:SS[.f+]]] or HH[MM[SS[.f+]]]), then Z or an offset of the same form.
_CLOCK = (r"(?:([0-9]{2})(?::([0-9]{2})(?::([0-9]{2})(?:[.,]([0-9]+))?)?)?"
          r"|([0-9]{2})([0-9]{2})(?:([0-9]{2})(?:[.,]([0-9]+))?)?)")
_STAMP = (rf"^([0-9]{{4}})-([0-9]{{2}})-([0-9]{{2}})(?:(?s:.){_CLOCK}(?:(Z)|([+-]){_CLOCK})?)?$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STAMP_PARTS = ["y", "mo", "d", "h", "mi", "s", "f", "h2", "mi2", "s2", "f2", "z", "sign",
                "oh", "om", "os", "of", "oh2", "om2", "os2", "of2"]

# The helpers below were TEMP MACROs: DuckDB expands a macro where it is called anyway, but a
# statement that calls one reads the catalog, and a prepared statement that reads the catalog
# is bound and optimized again at every EXECUTE (DuckDB 2.0 re-checks its catalog identity;
# a 10-row batch of the order route spent 34 ms there). As SQL text built here, the
# statement reads no catalog entry and ``transform.outbox`` prepares it once.


def _arg(expression: str) -> str:
    """An argument as one SQL term (a name stays as it is)."""
    return expression if _NAME.fullmatch(expression) else f"({expression})"


def _field(parts: str, name: str) -> str:
    """Field ``name`` of a STRUCT of number parts (``ob_parts``)."""
    return f"{parts}.{name}" if _NAME.fullmatch(parts) else f"struct_extract({_arg(parts)}, '{name}')"


def ob_strip(s: str) -> str:
    """``s`` trimmed as Python's str.strip() trims."""
    return f"regexp_replace({s}, '^{_WS}+|{_WS}+$', '', 'g')"


def ob_parts(nt: str) -> str:
    """A number's text -> its parts (sign ``sg``, integer digits ``i``, fraction ``f``,
    exponent ``e``)."""
    return (f"regexp_extract({nt}, "
            r"'^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$', ['sg', 'i', 'f', 'e'])")


def ob_exp(e: str) -> str:
    """The exponent's text as a BIGINT, clamped so that 1e999999999 stays arithmetic."""
    e = _arg(e)
    return (f"CASE WHEN {e} = '' THEN 0 WHEN length(ltrim({e}, '+-0')) > 12 THEN CASE WHEN "
            f"{e}[1] = '-' THEN -1000000000000 ELSE 1000000000000 END ELSE CAST({e} AS BIGINT) END")


# The value is (-1)^sg * coef * 10^q, coef without leading or trailing zeros ('' = 0).
def ob_coef(p: str) -> str:
    return f"trim({_field(p, 'i')} || {_field(p, 'f')}, '0')"


def ob_q(p: str) -> str:
    digits = f"{_field(p, 'i')} || {_field(p, 'f')}"
    return (f"({ob_exp(_field(p, 'e'))} - length({_field(p, 'f')}) + length({digits}) "
            f"- length(rtrim({digits}, '0')))")


def ob_lpad(x: str, n: str) -> str:
    """lpad that never truncates (DuckDB's does)."""
    x, n = _arg(x), _arg(n)
    return f"CASE WHEN length({x}) >= {n} THEN {x} ELSE lpad({x}, CAST({n} AS INTEGER), '0') END"


def ob_point(digits: str, scale: str) -> str:
    digits, scale = _arg(digits), _arg(scale)
    return f"(left({digits}, length({digits}) - {scale}) || '.' || right({digits}, {scale}))"


def ob_mark(d: str) -> str:
    """Every number token -> "N<text>", every string token -> "S<text>" (keys too): one
    regexp_replace brackets each token with control characters (which valid JSON never
    holds raw), and four replaces turn the brackets into the marks."""
    return ("replace(replace(replace(replace(regexp_replace("
            f"{d}, '({JSON_STRING})|(-?[0-9][0-9.eE+-]*)', chr(1) || '\\1' || chr(2) || '\\2' "
            "|| chr(3), 'g'), chr(2) || chr(3), ''), chr(1) || chr(2), '\"N'), chr(1) || '\"', "
            "'\"S'), chr(3), '\"')")


def ob_lower_escapes(s: str) -> str:
    """yyjson writes \\u001F, Python \\u001f (a tokenizer, so that an escaped backslash
    followed by the text u001F stays as it is; only text holding \\u pays for it)."""
    s = _arg(s)
    return (f"CASE WHEN contains({s}, '\\u') THEN array_to_string(list_transform("
            f"regexp_extract_all({s}, '\\\\u[0-9A-Fa-f]{{4}}|\\\\.|[^\\\\]+'), "
            "lambda y: CASE WHEN y[1:2] = '\\u' THEN lower(y) ELSE y END), '') "
            f"ELSE {s} END")


def ob_unmark(j: str) -> str:
    """Marked JSON text -> Python's json.dumps(ensure_ascii=False, separators=(',', ':')): a
    mark starts right after [ { , : or the start (never after a backslash: an escaped
    quote inside a string's text)."""
    return ob_lower_escapes(
        "regexp_replace(regexp_replace(regexp_replace(' ' || " + _arg(j) + ", "
        "'([^\\\\])\"N-0\"', '\\10', 'g'), "
        "'([^\\\\])\"N(-?[0-9][0-9.eE+-]*)\"', '\\1\\2', 'g'), "
        "'([^\\\\])\"S', '\\1\"', 'g')[2:]")


def ob_lenient(d: str) -> str:
    d = _arg(d)
    return (f"(regexp_matches({d}, '{_LENIENT}') AND regexp_matches(regexp_replace({d}, "
            f"'{JSON_STRING}', '0', 'g'), '{_LENIENT}'))")


def ob_micros(f: str) -> str:
    return f"CAST(rpad(left({f}, 6), 6, '0') AS BIGINT)"


# -- the route -------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouteColumn:
    name: str
    label: str  # the JSON path, or "outbox column <name>" (for messages)
    steps: tuple[str | int, ...]
    planned: PlannedColumn
    row_column: str | None  # taken from the outbox row (its typed MySQL value)
    null_on_error: bool

    @property
    def target(self) -> TargetType:
        return self.planned.target_type


@dataclass(frozen=True)
class Route:
    spec: OutboxPlan
    columns: tuple[RouteColumn, ...]
    delete_when: tuple[str | int, ...] | None


@lru_cache(maxsize=64)
def route_of(table: TablePlan) -> Route:
    """The route's columns (payload paths first, then the outbox row's columns)."""
    spec = table.outbox
    assert spec is not None
    by_name = {c.source_column: c for c in table.data_columns}
    columns = [RouteColumn(name, path, parse_path(path).steps, by_name[name], None,
                       name in spec.null_on_error) for name, path in spec.paths]
    columns += [RouteColumn(name, f"outbox column {row_column}", (), by_name[name], row_column,
                        name in spec.null_on_error) for name, row_column in spec.row_columns]
    return Route(spec, tuple(columns),
                  parse_path(spec.delete_when).steps if spec.delete_when else None)


def json_path(steps: tuple[str | int, ...], *, marked: bool = False) -> str:
    """DuckDB's path text for ``steps`` (a bind parameter, never SQL text): a JSON pointer
    where every step is a key (any key, even ``""``), else ``$`` syntax, where an index
    looked up in an object finds nothing, as ``model.jsonpath.evaluate`` does."""
    prefix = "S" if marked else ""
    if all(isinstance(step, str) for step in steps):
        return "".join("/" + prefix + str(step).replace("~", "~0").replace("/", "~1")
                       for step in steps)
    text = "$"
    for step in steps:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += '."' + prefix + step.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


# -- the statement ---------------------------------------------------------------------------

_NUMBERS = "('BIGINT', 'UBIGINT', 'DOUBLE', 'HUGEINT')"
_INEXACT = "('DOUBLE', 'HUGEINT')"  # numbers DuckDB's reader does not keep as written


def _literal(text: str) -> str:
    """A path of the plan as a SQL string literal (paths are the statement's, like its
    identifiers; no row's value ever enters the text)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class _Sql:
    """Column ``i``'s names in the statement: JSON type ``t``, number text ``nt``, number
    parts ``np``, timestamp parts ``ts``; ``path``/``marked``: its path literals."""

    i: int
    path: str
    marked: str
    slot: int  # its place in the list of paths extracted at once (1-based)

    @property
    def t(self) -> str:
        return f"t{self.i}"

    @property
    def nt(self) -> str:
        return f"nt{self.i}"

    @property
    def np(self) -> str:
        return f"np{self.i}"

    @property
    def ts(self) -> str:
        return f"ts{self.i}"

    @property
    def x(self) -> str:  # the converted value (before on_error)
        return f"x{self.i}"

    @property
    def coef(self) -> str:  # the number's coefficient without leading/trailing zeros
        return f"c{self.i}"

    @property
    def q(self) -> str:  # its exponent: the value is sign * coef * 10^q
        return f"q{self.i}"

    @property
    def value(self) -> str:  # the JSON text at the path (DuckDB's: numbers as DOUBLEs)
        return f"jv[{self.slot}]"

    @property
    def marked_text(self) -> str:  # the JSON text at the marked path
        return f"mv[{self.slot}]::VARCHAR"

    @property
    def string(self) -> str:  # the text of a string, a number or a boolean (a column)
        return f"sv{self.i}"

    @property
    def stripped(self) -> str:  # that text trimmed as Python's str.strip() trims (a column)
        return f"ss{self.i}"

    @property
    def marked_string(self) -> str:
        return f"json_extract_string(mv[{self.slot}], '$')"


def _kind_name(t: str) -> str:
    """Python's name of the JSON value's kind (``t``: its json_type)."""
    return (f"CASE {t} WHEN 'BOOLEAN' THEN 'a boolean' WHEN 'VARCHAR' THEN 'a string' "
            f"WHEN 'OBJECT' THEN 'an object' WHEN 'ARRAY' THEN 'an array' ELSE 'a number' END")


def _needs_mark(target: TargetType, t: str) -> str:
    if target.kind == "json":
        return f"({t} IS NOT NULL AND {t} <> 'NULL')"
    if target.kind in ("string", "time_text"):
        return f"{t} IN ('OBJECT', 'ARRAY', 'DOUBLE', 'HUGEINT')"
    if target.kind in ("integer", "decimal", "float", "boolean"):
        return f"{t} IN {_INEXACT}"
    return "FALSE"


def _number_text(c: _Sql) -> str:
    """The exact text of a number at the column's path, or the trimmed string there."""
    return (f"CASE WHEN {c.t} IN ('BIGINT', 'UBIGINT') THEN {c.string} "
            f"WHEN {c.t} IN {_INEXACT} THEN {c.marked_string}[2:] "
            f"WHEN {c.t} = 'VARCHAR' THEN {c.stripped} END")


def _number_check(c: _Sql, what: str) -> str:
    """``_number``'s refusals: a JSON value that is no number and no numeric text."""
    return (f"CASE WHEN {c.t} IN ('BOOLEAN', 'OBJECT', 'ARRAY') THEN 'is ' || {_kind_name(c.t)} "
            f"|| ', not {what}' WHEN {c.t} = 'VARCHAR' AND NOT regexp_full_match({c.nt}, "
            f"'{_NUMBER}') THEN 'is not {what}' END")


def _convert_path(c: _Sql, target: TargetType) -> tuple[list[str], str, str]:
    """(columns computed first, value, reason) SQL of a payload column; the reason reads
    the value as ``c.x``, and is NULL where the value converts."""
    pre, value, reason = _convert_path_parts(c, target)
    return pre, value, reason.replace(f"({value})", c.x)


def _convert_path_parts(c: _Sql, target: TargetType) -> tuple[list[str], str, str]:
    t, nt, p = c.t, c.nt, c.np
    kind = target.kind
    coef, q_ = c.coef, c.q
    numbers = [f"{ob_coef(p)} AS {coef}", f"{ob_q(p)} AS {q_}"]
    if kind == "integer":
        digits = f"(length({coef}) + {q_})"
        high, low = "9223372036854775807", "-9223372036854775808"
        if target.precision:
            bound = 10 ** target.precision - 1
            high, low = str(min(int(high), bound)), str(max(int(low), -bound))
        value = (f"CASE WHEN {coef} = '' THEN 0::HUGEINT WHEN {q_} >= 0 AND {digits} <= 19 THEN "
                 f"CAST({p}.sg || {coef} || repeat('0', CAST({q_} AS BIGINT)) AS HUGEINT) END")
        reason = (f"coalesce({_number_check(c, 'an integer')}, CASE WHEN {coef} <> '' AND {q_} < 0 "
                  f"THEN 'has a fraction; an integer column would lose it' "
                  f"WHEN ({value}) IS NULL OR ({value}) > {high} OR ({value}) < {low} "
                  f"THEN 'is out of range' END)")
        return numbers, f"CAST(CASE WHEN ({value}) BETWEEN {low} AND {high} THEN {value} END AS BIGINT)", reason
    if kind == "decimal":
        precision, scale = target.precision or 38, target.scale or 0
        digits = f"(length({coef}) + {q_} + {scale})"  # of the value at the column's scale
        unscaled = f"({coef} || repeat('0', CAST(greatest({q_} + {scale}, 0) AS BIGINT)))"
        text = ob_point(ob_lpad(unscaled, str(scale + 1)), str(scale)) if scale else unscaled
        value = (f"CASE WHEN {coef} = '' THEN 0::DECIMAL({precision},{scale}) WHEN {digits} <= "
                 f"{precision} AND {q_} >= -{scale} THEN CAST({p}.sg || {text} AS "
                 f"DECIMAL({precision},{scale})) END")
        rounded = ("has a fraction (it would be rounded)" if scale == 0 else
                   f"has more than {scale} decimal places (it would be rounded)")
        reason = (f"coalesce({_number_check(c, 'a number')}, CASE WHEN {coef} = '' THEN NULL "
                  f"WHEN {digits} > 100 THEN 'is too large' WHEN {q_} < -{scale} THEN '{rounded}' "
                  f"WHEN {digits} > {precision} THEN 'has more than {precision} digits' END)")
        return numbers, value, reason
    if kind == "float":
        value = f"CASE WHEN {nt} = '-0' THEN 0.0::DOUBLE ELSE TRY_CAST({nt} AS DOUBLE) END"
        reason = (f"coalesce({_number_check(c, 'a number')}, CASE WHEN isinf(({value})) "
                  f"THEN 'is too large for a FLOAT' END)")
        return [], value, reason
    if kind in ("string", "time_text"):
        numbers = [f"{ob_exp(p + '.e')} - length({p}.f) AS ex{c.i}", f"ltrim({p}.i || {p}.f, '0') AS k{c.i}"]
        value = (f"CASE WHEN {t} IN ('VARCHAR', 'BOOLEAN') THEN {c.string} "
                 f"WHEN {t} IN {_NUMBERS} THEN {_plain(c)} "
                 f"WHEN {t} IN ('OBJECT', 'ARRAY') THEN {ob_unmark(c.marked_text)} END")
        reason = "NULL"
        if target.length is not None:
            reason = (f"CASE WHEN length(({value})) > {target.length} THEN 'is ' || "
                      f"length(({value})) || ' characters long, more than {target.length}' END")
        return numbers, value, reason
    if kind == "boolean":
        text = f"lower({c.stripped})"
        value = (f"CASE WHEN {t} = 'BOOLEAN' THEN {c.string} = 'true' "
                 f"WHEN {t} IN ('BIGINT', 'UBIGINT') AND {nt} IN ('0', '1') THEN {nt} = '1' "
                 f"WHEN {t} = 'VARCHAR' AND {text} IN ('true', 'false') THEN {text} = 'true' END")
        reason = (f"CASE WHEN ({value}) IS NULL THEN "
                  "'is not a boolean (true, false, 0, 1, \"true\", \"false\")' END")
        return [], value, reason
    if kind == "date":
        text = f"{c.stripped}"
        shaped = f"({t} = 'VARCHAR' AND regexp_full_match({text}, '[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}'))"
        value = f"CASE WHEN {shaped} AND {text} >= '0001' THEN TRY_CAST({text} AS DATE) END"
        reason = (f"CASE WHEN NOT {shaped} THEN 'is not an ISO-8601 date (YYYY-MM-DD)' "
                  f"WHEN ({value}) IS NULL THEN 'is not a valid date (' || {_date_problem(text)} "
                  "|| ')' END")
        return [], value, reason
    if kind in ("timestamp", "timestamp_tz"):
        return _timestamp(c, target)
    if kind == "binary":
        text = c.string
        value = (f"CASE WHEN {t} = 'VARCHAR' AND length({text}) % 4 = 0 AND regexp_full_match("
                 f"{text}, '[A-Za-z0-9+/]*={{0,2}}') THEN from_base64({text}) END")
        reason = (f"CASE WHEN {t} <> 'VARCHAR' THEN 'is ' || {_kind_name(t)} || ', not base64 "
                  f"text' WHEN ({value}) IS NULL THEN 'is not base64 text' END")
        return [], value, reason
    # json (VARIANT): any JSON value as its text
    return [], ob_unmark(c.marked_text), "NULL"


def _plain(c: _Sql) -> str:
    """Python's format(Decimal(text), 'f') of the number (every digit, never an exponent),
    or str(int) of an integer's text; ``ex``: the exponent of its last digit, ``k``: its
    digits without leading zeros (columns computed first)."""
    p, ex, k = c.np, f"ex{c.i}", f"k{c.i}"
    digits = f"coalesce(nullif({k}, ''), '0')"
    padded = f"CASE WHEN length({digits}) > -{ex} THEN {digits} ELSE lpad({digits}, CAST(1 - {ex} AS INTEGER), '0') END"
    return (f"CASE WHEN {p}.f = '' AND {p}.e = '' THEN CASE WHEN {c.nt} = '-0' THEN '0' ELSE {c.nt} END "
            f"WHEN {ex} >= 0 THEN {p}.sg || CASE WHEN {k} = '' THEN '0' ELSE {k} || repeat('0', "
            f"CAST({ex} AS BIGINT)) END ELSE {p}.sg || {ob_point(padded, '-' + ex)} END")


def _date_problem(text: str) -> str:
    """Python's words for a YYYY-MM-DD text that is no date."""
    return (f"CASE WHEN left({text}, 4) = '0000' THEN 'year 0 is out of range' "
            f"WHEN {text}[6:7] NOT BETWEEN '01' AND '12' THEN 'month must be in 1..12' "
            "ELSE 'day is out of range for month' END")


def _timestamp(c: _Sql, target: TargetType) -> tuple[list[str], str, str]:
    t, s = c.t, c.ts
    text = f"{c.stripped}"
    shaped = f"({t} = 'VARCHAR' AND regexp_matches({text}, '^[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}'))"

    def part(a: str, b: str) -> str:
        return f"nullif({s}.{a} || {s}.{b}, '')"

    h, mi, sec, frac = part("h", "h2"), part("mi", "mi2"), part("s", "s2"), part("f", "f2")
    oh, om, osec, ofrac = part("oh", "oh2"), part("om", "om2"), part("os", "os2"), part("of", "of2")
    day = f"TRY_CAST({s}.y || '-' || {s}.mo || '-' || {s}.d AS DATE)"
    micros = (f"(epoch_us({day}::TIMESTAMP) + coalesce(CAST({h} AS BIGINT), 0) * 3600000000 "
              f"+ coalesce(CAST({mi} AS BIGINT), 0) * 60000000 + coalesce(CAST({sec} AS BIGINT), 0) "
              f"* 1000000 + coalesce({ob_micros(frac)}, 0))")
    offset = (f"(CASE WHEN {s}.sign = '-' THEN -1 ELSE 1 END * (coalesce(CAST({oh} AS BIGINT), 0) "
              f"* 3600000000 + coalesce(CAST({om} AS BIGINT), 0) * 60000000 + coalesce(CAST({osec} "
              f"AS BIGINT), 0) * 1000000 + coalesce({ob_micros(ofrac)}, 0)))")
    invalid = "'Invalid isoformat string: ''' || " + text + " || ''''"
    problem = (f"CASE WHEN {s}.y = '' THEN {invalid} "
               f"WHEN {day} IS NULL OR {s}.y = '0000' THEN {_date_problem(text)} "
               f"WHEN CAST({h} AS INTEGER) > 23 THEN 'hour must be in 0..23' "
               f"WHEN CAST({mi} AS INTEGER) > 59 THEN 'minute must be in 0..59' "
               f"WHEN CAST({sec} AS INTEGER) > 59 THEN 'second must be in 0..59' "
               f"WHEN abs({offset}) >= 86400000000 THEN 'offset must be a timedelta strictly "
               "between -timedelta(hours=24) and timedelta(hours=24)' END")
    pre = [f"{problem} AS pr{c.i}", f"({micros} - {offset}) AS um{c.i}"]
    problem, utc = f"pr{c.i}", f"um{c.i}"
    value = f"CASE WHEN {shaped} AND ({problem}) IS NULL THEN make_timestamp({utc}) END"
    if target.kind == "timestamp_tz":
        value = f"CAST({value} AS TIMESTAMPTZ)"
    fsp = 6 if target.fsp is None else target.fsp
    reason = (f"CASE WHEN NOT {shaped} THEN "
              "'is not an ISO-8601 timestamp (YYYY-MM-DDTHH:MM:SS[.ffffff][+HH:MM|Z])' "
              f"WHEN ({problem}) IS NOT NULL THEN 'is not a valid ISO-8601 timestamp (' || "
              f"({problem}) || ')'")
    if fsp < 6:
        reason += (f" WHEN {utc} % {10 ** (6 - fsp)} <> 0 THEN "
                   f"'has more than {fsp} fractional digits'")
    return pre, value, reason + " END"


def _convert_row(column: RouteColumn, kind: str | None, source_of: str) -> tuple[str, str, str]:
    """(value, reason, missing) of a column taken from the outbox row: converted as a table
    column's declared type converts it (``transform.columns.convert``); a value it cannot
    hold fails."""
    if kind is None:  # a batch without the column: NULL, as a row without it
        return "NULL", "NULL", "'null'"
    source = source_of
    value = f"TRY({convert(source, kind, column.planned)})"
    return value, (f"CASE WHEN {source} IS NOT NULL AND ({value}) IS NULL THEN "
                   f"'does not fit {column.target.describe()}' END"), \
        f"CASE WHEN {source} IS NULL THEN 'null' END"


def _truthy(c: _Sql) -> str:
    """delete_when: true, a non-zero number, or the text true/1/yes (any case)."""
    number = ob_coef(ob_parts(f"{c.marked_string}[2:]"))
    return (f"CASE WHEN {c.t} = 'BOOLEAN' THEN {c.string} = 'true' "
            f"WHEN {c.t} IN ('BIGINT', 'UBIGINT') THEN {c.string} <> '0' "
            f"WHEN {c.t} IN {_INEXACT} THEN {number} <> '' "
            f"WHEN {c.t} = 'VARCHAR' THEN lower({c.stripped}) IN ('true', '1', 'yes') "
            "ELSE FALSE END")


# What the statement reads: the name of the local variable through which
# ``transform.outbox._run`` hands DuckDB the rows (its Python replacement scan).
ROWS = "outbox_rows"


@lru_cache(maxsize=64)
def statement(table: TablePlan, payload_kind: str, row_kinds: tuple[tuple[str, str], ...]) -> str:
    """The statement over the route's rows (the view ``outbox_rows``): per row ``ORD``,
    the payload's problem (``payload_error``), each column's value ``v<i>`` and reason
    ``e<i>`` (``missing``/``null`` for a key that is not there), and ``deleted``."""
    route = route_of(table)
    kinds = dict(row_kinds)
    payload = q(route.spec.payload_column)
    if payload_kind == "binary":
        doc = f"TRY(decode({payload}))"
        not_text = f"{doc} IS NULL", "'it is not UTF-8 text'"
    elif payload_kind == "string":
        doc, not_text = payload, ("FALSE", "NULL")
    else:
        doc, not_text = "NULL::VARCHAR", ("TRUE", f"'a {payload_kind}, not JSON text'")
    payload_error = (f"CASE WHEN {payload} IS NULL THEN 'null' WHEN {not_text[0]} THEN {not_text[1]} "
                     f"WHEN NOT json_valid({doc}) THEN 'invalid' WHEN {ob_lenient(doc)} THEN 'lenient' "
                     f"WHEN json_type({doc}) NOT IN ('OBJECT', 'ARRAY') THEN 'scalar' END")
    payload_columns = [(i, c) for i, c in enumerate(route.columns) if c.row_column is None]
    sql_of = {i: _Sql(i, _literal(json_path(c.steps)), _literal(json_path(c.steps, marked=True)),
                      slot) for slot, (i, c) in enumerate(payload_columns, start=1)}
    deleting = None
    if route.delete_when is not None:
        deleting = _Sql(len(route.columns), _literal(json_path(route.delete_when)),
                        _literal(json_path(route.delete_when, marked=True)), len(sql_of) + 1)
    every = [*sql_of.values(), *([deleting] if deleting else [])]
    # Each document is parsed once for all paths (json_extract of a list of paths), and
    # once more, marked, where a value needs its exact text.
    paths = ", ".join(c.path for c in every)
    marked_paths = ", ".join(c.marked for c in every)
    types = [f"json_type({c.value}) AS {c.t}, json_extract_string({c.value}, '$') AS {c.string}"
             for c in every]
    strips = [f"{ob_strip(c.string)} AS {c.stripped}" for c in every]
    marks = [_needs_mark(route.columns[i].target, c.t) for i, c in sql_of.items()]
    if deleting is not None:
        marks.append(f"{deleting.t} IN {_INEXACT}")
    numeric = [c for i, c in sql_of.items() if route.columns[i].target.kind in (
        "integer", "decimal", "float", "string", "time_text", "boolean")]
    texts = [f"{_number_text(c)} AS {c.nt}" for c in numeric]
    texts += [f"regexp_extract({c.stripped}, {_literal(_STAMP)}, "
              f"[{', '.join(_literal(n) for n in _STAMP_PARTS)}]) AS {c.ts}"
              for i, c in sql_of.items() if route.columns[i].target.kind in ("timestamp", "timestamp_tz")]
    parts = [f"{ob_parts(c.nt)} AS {c.np}" for c in numeric]
    out = [q(ORD), "payload_error"]
    pre: list[str] = []
    valued: list[str] = []
    for i, column in enumerate(route.columns):
        if column.row_column is None:
            c = sql_of[i]
            first, value, reason = _convert_path(c, column.target)
            pre += first
            valued.append(f"CASE WHEN {c.t} <> 'NULL' THEN {value} END AS {c.x}")
            value = c.x
            reason = f"CASE WHEN {c.t} IS NULL OR {c.t} = 'NULL' THEN NULL ELSE {reason} END"
            missing = f"CASE WHEN {c.t} IS NULL THEN 'missing' WHEN {c.t} = 'NULL' THEN 'null' END"
        else:
            value, reason, missing = _convert_row(column, kinds.get(column.row_column or ""), f"r{i}")
            valued.append(f"{value} AS x{i}")
            reason = reason.replace(f"({value})", f"x{i}")
            value = f"x{i}"
        if column.null_on_error:
            value, reason = f"CASE WHEN ({reason}) IS NULL THEN {value} END", "NULL"
        if column.planned.is_key:
            reason = f"coalesce({missing}, {reason})"
        out.append(f"{value} AS v{i}")
        out.append(f"CAST({reason} AS VARCHAR) AS e{i}")
    out.append(f"coalesce({_truthy(deleting)}, FALSE) AS deleted" if deleting else "FALSE AS deleted")

    def select(columns: list[str]) -> str:
        return "".join(", " + column for column in columns)

    # Only the columns the statement reads (an outbox column may be called d or m).
    own = "".join(f", {q(c.row_column)} AS r{i}" for i, c in enumerate(route.columns)
                  if c.row_column is not None and c.row_column in kinds)
    return (f"WITH checked AS (SELECT {q(ORD)}, {doc} AS doc, {payload_error} AS payload_error"
            f"{own} FROM {ROWS}),\n"
            f"docs AS (SELECT *, CASE WHEN payload_error IS NULL THEN doc END AS d FROM checked),\n"
            f"extracted AS (SELECT *, json_extract(d, [{paths}]) AS jv FROM docs),\n"
            f"typed AS (SELECT *{select(types)} FROM extracted),\n"
            f"stripped AS (SELECT *{select(strips)} FROM typed),\n"
            f"marked AS (SELECT *, CASE WHEN {' OR '.join(marks) or 'FALSE'} THEN "
            f"json_extract({ob_mark('d')}, [{marked_paths}]) END AS mv FROM stripped),\n"
            f"texts AS (SELECT *{select(texts)} FROM marked),\n"
            f"parted AS (SELECT *{select(parts)} FROM texts),\n"
            f"pre AS (SELECT *{select(pre)} FROM parted),\n"
            f"valued AS (SELECT *{select(valued)} FROM pre)\n"
            f"SELECT {', '.join(out)} FROM valued ORDER BY {q(ORD)}")


# The input rows' order (the batch's), carried through the statement.
ORD = cb.INTERNAL_PREFIX + "outbox_ord"
