"""SQL (DuckDB) for one staged column: a source value -> the staging value of its target type.

The one place of the value conversions (the per-row converter it was the twin of is gone:
docs/decisions/one-data-plane.md): text forms as MySQL prints them, roundings and masks, as
DuckDB expressions over a change batch's Arrow columns (DuckDB scans Arrow in place,
and its conversions are exact where Arrow's are not: DECIMAL -> DOUBLE in Arrow 26 is off in
the last bit for ~half of the values, measured; DuckDB's DOUBLE -> VARCHAR is Python's repr).
Every function returns SQL text over already quoted inputs; values never enter it (a salt is
a bind parameter, collected in ``Params``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.plan.identifiers import quote_identifier

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import TargetType


class Params(list):  # type: ignore[type-arg]
    """Bind parameters of the statement being built, in order of their ``?``."""

    def bind(self, value: object) -> str:
        self.append(value)
        return "?"


def q(name: str) -> str:
    return quote_identifier(name)


def source_kind(arrow_type: pa.DataType) -> str:
    """int uint decimal float bool string binary date timestamp timestamp_tz (batch types)."""
    import pyarrow as pa
    import pyarrow.types as t

    if t.is_boolean(arrow_type):
        return "bool"
    if t.is_unsigned_integer(arrow_type):
        return "uint"
    if t.is_integer(arrow_type):
        return "int"
    if t.is_decimal(arrow_type):
        return "decimal"
    if t.is_floating(arrow_type):
        return "float"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type):
        return "binary"
    if t.is_date(arrow_type):
        return "date"
    if t.is_timestamp(arrow_type):
        return "timestamp_tz" if arrow_type.tz is not None else "timestamp"
    if arrow_type == pa.null():
        return "null"
    return "string"


def decimal_text(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """A DECIMAL over 38 digits (a decimal256 column: DuckDB has no such type) as exact text,
    as MySQL prints it: every digit of its scale, never an exponent (``model.text.value_text``).
    Arrow's cast writes a value under 1e-6 with one (``1E-30``, ``0E-30``: Java's
    ``BigDecimal.toString``), so those values are rewritten from their digits, columnar."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = values.cast(pa.string())
    exponent = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(exponent).as_py():
        return text
    # Under 1e-6 the text is [-]D[.DDD]E-N: the unscaled value's digits, so the plain text is
    # the sign, "0." and those digits left-padded with zeros to the scale.
    parts = pc.extract_regex(pc.if_else(exponent, text, "0E0"), r"^(?P<sign>-?)(?P<digits>[0-9.]+)E")
    digits = pc.replace_substring(pc.struct_field(parts, "digits"), ".", "")
    plain = pc.binary_join_element_wise(pc.struct_field(parts, "sign"), "0.",
                                        pc.utf8_lpad(digits, width=values.type.scale, padding="0"), "")
    return pc.if_else(exponent, plain, text)


def _iso(sql: str, fmt: str) -> str:
    # Python's isoformat: microseconds only when there are any.
    return f"regexp_replace(strftime({sql}, '{fmt}.%f'), '\\.000000$', '')"


def text_form(sql: str, kind: str) -> str:
    """The value's text as ``model.text.value_text`` writes it (MySQL's printing)."""
    if kind == "string":
        return sql
    if kind == "binary":
        return f"lower(hex({sql}))"
    if kind == "timestamp":
        return _iso(sql, "%Y-%m-%d %H:%M:%S")
    if kind == "timestamp_tz":
        return f"({_iso(sql, '%Y-%m-%d %H:%M:%S')} || '+00:00')"
    if kind == "date":
        return f"strftime({sql}, '%Y-%m-%d')"
    if kind == "bool":
        return f"CASE WHEN {sql} THEN '1' ELSE '0' END"
    if kind == "float":  # DuckDB prints doubles as Python's repr, but NaN as '-nan'
        return f"CASE WHEN isnan({sql}) THEN 'nan' ELSE CAST({sql} AS VARCHAR) END"
    return f"CAST({sql} AS VARCHAR)"  # integers; decimals keep every digit of their scale


_INT_SQL = {8: "TINYINT", 16: "SMALLINT", 32: "INTEGER", 64: "BIGINT"}


def _time_micros(sql: str) -> str:
    """MySQL TIME text ('-838:59:59.000001') -> microseconds (``_to_int`` of a timedelta)."""
    parts = "regexp_extract({s}, '^(-?)(\\d+):(\\d+):(\\d+)(?:\\.(\\d{{1,6}}))?$', ['sign', 'h', 'm', 's', 'f'])"
    p = parts.format(s=sql)
    magnitude = (f"((CAST({p}.h AS BIGINT) * 3600 + CAST({p}.m AS BIGINT) * 60 + "
                 f"CAST({p}.s AS BIGINT)) * 1000000 + CAST(rpad(coalesce({p}.f, ''), 6, '0') AS BIGINT))")
    return f"(CASE WHEN {p}.sign = '-' THEN -1 ELSE 1 END * {magnitude})"


def convert(sql: str, kind: str, column: PlannedColumn) -> str:
    """``sql`` (a value of batch kind ``kind``) as the column's target type, unmasked."""
    target: TargetType = column.target_type
    is_time = column.mysql_type is not None and column.mysql_type.name == "time"
    goal = target.kind
    if goal == "integer":
        type_sql = _INT_SQL[target.bits or 64]
        if is_time:
            return f"CAST({_time_micros(sql)} AS {type_sql})"
        if kind in ("decimal", "float"):  # int(): toward zero, never rounded
            return f"CAST(trunc({sql}) AS {type_sql})"
        if kind == "string":
            return f"CAST(trunc(CAST({sql} AS DECIMAL(38,10))) AS {type_sql})"
        return f"CAST({sql} AS {type_sql})"
    if goal == "decimal":
        p, s = target.precision or 38, target.scale or 0
        if is_time:
            return f"CAST({_time_micros(sql)} AS DECIMAL({p},{s}))"
        if kind == "decimal":
            return f"CAST(round_even({sql}, {s}) AS DECIMAL({p},{s}))"
        if kind in ("float", "string"):  # Decimal(repr(f)) / Decimal(text), then HALF_EVEN
            text = text_form(sql, kind)
            return f"CAST(round_even(CAST({text} AS DECIMAL(38,{min(s + 1, 37)})), {s}) AS DECIMAL({p},{s}))"
        return f"CAST({sql} AS DECIMAL({p},{s}))"
    if goal == "float":
        return f"CAST({sql} AS DOUBLE)"
    if goal in ("string", "time_text"):
        return text_form(sql, kind)
    if goal == "boolean":
        if kind == "bool":
            return sql
        if kind == "string":
            return f"(lower(trim({sql}, ' \t\n\r\x0b\x0c')) NOT IN ('', '0', 'false', 'f', 'n', 'no'))"
        if kind == "binary":
            return f"regexp_matches(hex({sql}), '[1-9A-F]')"
        return f"({sql} <> 0)"
    if goal == "date":
        if kind == "string":
            return f"CAST(left({sql}, 10) AS DATE)"
        return f"CAST({sql} AS DATE)"
    if goal == "timestamp":
        return f"CAST({sql} AS TIMESTAMP)"
    if goal == "timestamp_tz":
        return f"CAST({sql} AS TIMESTAMPTZ)"
    if goal == "binary":
        if kind in ("int", "uint", "bool"):  # BIT(n): big-endian, ceil(n/8) bytes
            width = max(1, ((column.mysql_type.length or 1) + 7) // 8) if column.mysql_type else 8
            return f"unhex(lpad(to_hex(CAST({sql} AS UBIGINT)), {2 * width}, '0'))"
        if kind == "string":
            return f"encode({sql})"
        return sql
    if goal == "json":
        if kind == "binary":
            return f"decode({sql})"
        return text_form(sql, kind)
    raise ValueError(f"no staging conversion for target type {goal}")  # pragma: no cover


def staged_value(sql: str, kind: str, column: PlannedColumn, params: Params) -> str:
    """The staged value: converted, then masked (truncate after the conversion)."""
    mask = column.mask
    if mask is None:
        return convert(sql, kind, column)
    if mask == "null":
        return "NULL"
    if mask == "truncate":
        length = column.mask_length or 0
        converted = convert(sql, kind, column)
        if column.target_type.kind == "binary":
            return f"CASE WHEN {length} = 0 THEN ''::BLOB ELSE {converted}[1:{length}] END"
        return f"substring({converted}, 1, {length})"
    if mask == "redact":
        if not column.mask_keep_last:
            return f"CASE WHEN {sql} IS NOT NULL THEN '***' END"
        keep = column.mask_keep_last
        text = text_form(sql, kind)
        return (f"CASE WHEN length({text}) <= {keep} THEN repeat('*', length({text})) "
                f"ELSE repeat('*', length({text}) - {keep}) || right({text}, {keep}) END")
    if kind == "binary":  # the raw bytes, salted by the salt's UTF-8 bytes
        data = sql
        if column.mask_salt:
            data = f"({params.bind(column.mask_salt.encode('utf-8'))}::BLOB || {data})"
    else:  # DuckDB hashes a VARCHAR's UTF-8 bytes; VARCHAR concatenation is ~1.7x BLOB's
        data = text_form(sql, kind)
        if column.mask_salt:
            data = f"({params.bind(column.mask_salt)}::VARCHAR || {data})"
    if mask == "sha256":
        return f"sha256({data})"
    if mask == "md5":
        return f"md5({data})"
    raise ValueError(f"no columnar mask {mask}")  # pragma: no cover
