"""Decoders for the binlog cells that need more than a ``struct`` field.

Each factory is called once per column when a table's row decoder is generated, and returns a
function of the cell's raw bytes. The results are exactly what ``read_changes`` produces
(python-mysql-replication's value, then ``source.values.binlog_converter``):

- DECIMAL: MySQL's packed decimal (groups of 9 digits in 4 bytes, sign in the top bit,
  negative values stored inverted) read as one integer, then ``Decimal`` of the digit string,
  so the exponent is the column's scale (``Decimal('5.00')``), as the library builds it;
- DATETIME2 / TIMESTAMP2 / DATE: bit fields; an impossible date (``0000-00-00``, a zero month
  or day) is a zero date: ``None`` and counted, or a SourceError, by the ``zero_dates`` policy;
- the fractional seconds of DATETIME2/TIMESTAMP2 follow the library's arithmetic (odd fsp
  drops the stored extra digit).

Layouts: https://dev.mysql.com/doc/dev/mysql-server/latest/ (my_time.cc, decimal.cc).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from replicator.source.values import ZeroDates

UTC = dt.UTC
_datetime = dt.datetime
_date = dt.date
_fromtimestamp = dt.datetime.fromtimestamp

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
FSP_BYTES = (0, 1, 1, 2, 2, 3, 3)


def decimal_size(precision: int, scale: int) -> int:
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    return DIG2BYTES[intg0x] + 4 * intg0 + 4 * frac0 + DIG2BYTES[frac0x]


def decimal_reader(precision: int, scale: int) -> Callable[[bytes], Decimal]:
    """A function of a DECIMAL(precision, scale) cell's bytes, generated as one expression
    over the cell read as a single big-endian integer (the groups are bit fields of it)."""
    intg0, intg0x = divmod(precision - scale, 9)
    frac0, frac0x = divmod(scale, 9)
    size = decimal_size(precision, scale)
    bits = size * 8
    top = 1 << (bits - 1)
    trail_bits = DIG2BYTES[frac0x] * 8
    frac_bits = 32 * frac0 + trail_bits
    # The integer part: a leading group of intg0x digits, then intg0 groups of 9 digits
    # (4 bytes each), weighted by powers of 10**9 from the right.
    whole_terms = [f"((n >> {frac_bits + 32 * k}) & 0xFFFFFFFF) * {10 ** (9 * k)}"
                   for k in range(intg0)]
    if intg0x:
        whole_terms.append(f"(n >> {frac_bits + 32 * intg0}) * {10 ** (9 * intg0)}")
    # The fraction: frac0 groups of 9 digits, then a trailing group of frac0x digits.
    frac_terms = [f"((n >> {trail_bits + 32 * (frac0 - 1 - k)}) & 0xFFFFFFFF) * "
                  f"{10 ** (9 * (frac0 - 1 - k) + frac0x)}" for k in range(frac0)]
    if frac0x:
        frac_terms.append(f"(n & {(1 << trail_bits) - 1})")
    whole = " + ".join(whole_terms) or "0"
    text = f'f"{{sign}}{{{whole}}}' + (f'.{{{" + ".join(frac_terms)}:0{scale}d}}"' if scale
                                          else '"')
    source = (
        "def read(data):\n"
        "    n = from_bytes(data, 'big')\n"
        f"    if n & {top}:\n"
        "        sign = ''\n"
        f"        n ^= {top}\n"
        "    else:\n"
        "        sign = '-'\n"
        f"        n ^= {(1 << bits) - 1 - top}\n"  # negative values are stored inverted
        f"    return Decimal({text})\n"
    )
    namespace: dict[str, Any] = {"from_bytes": int.from_bytes, "Decimal": Decimal}
    exec(compile(source, f"<DECIMAL({precision},{scale})>", "exec"), namespace)
    return namespace["read"]  # type: ignore[no-any-return,unused-ignore]


def _micros(fraction: int, fsp: int) -> int:
    if fsp % 2:
        fraction //= 10
    return fraction * 10 ** (6 - fsp)


def datetime2_reader(fsp: int, table: str, column: str) -> Callable[[bytes, ZeroDates], Any]:
    frac_bits = FSP_BYTES[fsp] * 8
    frac_mask = (1 << frac_bits) - 1
    odd = fsp % 2 == 1
    scale = 10 ** (6 - fsp)

    def read(data: bytes, zero_dates: ZeroDates) -> dt.datetime | None:
        packed = int.from_bytes(data, "big")
        if frac_bits:
            fraction = packed & frac_mask
            packed >>= frac_bits
            micros = (fraction // 10 if odd else fraction) * scale
        else:
            micros = 0
        year_month = (packed >> 22) & 0x1FFFF
        try:
            return _datetime(year_month // 13, year_month % 13, (packed >> 17) & 31,
                             (packed >> 12) & 31, (packed >> 6) & 63, packed & 63, micros)
        except ValueError:
            zero_dates(table, column, "0000-00-00")
            return None

    return read


def timestamp2_reader(fsp: int, table: str, column: str) -> Callable[[bytes, ZeroDates], Any]:
    frac_bits = FSP_BYTES[fsp] * 8
    frac_mask = (1 << frac_bits) - 1
    odd = fsp % 2 == 1
    scale = 10 ** (6 - fsp)

    def read(data: bytes, zero_dates: ZeroDates) -> dt.datetime | None:
        packed = int.from_bytes(data, "big")
        if frac_bits:
            fraction = packed & frac_mask
            seconds = packed >> frac_bits
            micros = (fraction // 10 if odd else fraction) * scale
        else:
            seconds, micros = packed, 0
        if not seconds and not micros:  # TIMESTAMP 0 is MySQL's zero timestamp
            zero_dates(table, column, "0000-00-00 00:00:00")
            return None
        value = _fromtimestamp(seconds, UTC)
        return value.replace(microsecond=micros) if micros else value

    return read


def date_reader(table: str, column: str) -> Callable[[int, ZeroDates], Any]:
    def read(packed: int, zero_dates: ZeroDates) -> dt.date | None:
        year, month, day = packed >> 9, (packed >> 5) & 15, packed & 31
        if not (year and month and day):
            zero_dates(table, column, "0000-00-00")
            return None
        return _date(year, month, day)

    return read


def set_reader(members: tuple[str, ...]) -> Callable[[int], str]:
    """A SET bitmask -> its members comma-joined in definition order ("" for none)."""
    cache: dict[int, str] = {}

    def read(mask: int) -> str:
        text = cache.get(mask)
        if text is None:
            text = ",".join(member for bit, member in enumerate(members) if mask >> bit & 1)
            if len(cache) < 4096:
                cache[mask] = text
        return text

    return read
