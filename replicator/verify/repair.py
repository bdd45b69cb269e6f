"""``verify --repair``: what to copy again so the target equals the source.

Repair never writes the target itself: it asks the pipeline's own re-copy
(``replicator snapshot FILE --table T [--where ...]``, ``engine.recopy``) to copy the rows
again. The running run (or the next one) takes the request under its lease and copies the
rows between stream batches as upserts under batch ids of their own, exactly once through
the state table; a change to one of those rows after the copy read it is in the binlog after
that point, so the stream applies it on top (the re-copy's argument). So repair is safe while
the pipeline runs and the source is written to.

Per table with differences:

- only ``missing`` and ``different`` keys (at most ``MAX_KEYS``): a conditional re-copy of
  exactly those keys, ``key IN (...)`` (a composite key: ``(a = .. AND b = ..) OR ...``),
  built as a sqlglot tree from the key values and checked by ``source.conditions`` like a
  user's ``--where``. The values are the verified keys (integers, decimals, text, dates),
  rendered as literals by sqlglot's MySQL dialect, never by string formatting; the re-copy
  request format is a condition, so that is where they go;
- ``extra`` or ``duplicate`` keys, more than ``MAX_KEYS`` keys, a masked key, or a key type
  with no literal: the whole table, because a conditional re-copy upserts and removes
  nothing, while a whole-table copy ends by removing the rows the source no longer has.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from replicator.model.catalog import Catalog
from replicator.plan.model import Plan
from replicator.source.conditions import condition_sql
from replicator.verify.report import VerifyReport

MAX_KEYS = 1_000


@dataclass(frozen=True)
class RepairRequest:
    """One re-copy to ask for: a source table, and the condition (None: every row)."""

    source_table: str  # db.table
    where: str | None
    keys: int  # differing keys it covers
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.source_table, "where": self.where, "keys": self.keys,
                "why": self.why}

    def describe(self) -> str:
        what = f"the rows where {self.where}" if self.where else "the whole table"
        return f"{self.source_table}: copy {what} again ({self.why})"


def _literal(value: Any) -> Any:
    from sqlglot import exp

    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, int | Decimal):
        return exp.Literal.number(format(value, "f") if isinstance(value, Decimal) else value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, dt.datetime):
        value = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return exp.Literal.string(value.isoformat(sep=" "))
    if isinstance(value, dt.date):
        return exp.Literal.string(value.isoformat())
    return None


def _keys_condition(names: list[str], keys: list[tuple[Any, ...]]) -> str | None:
    """``key IN (...)`` or an OR of key equalities as MySQL text; None if a value has no
    literal."""
    from sqlglot import exp

    literals = [[_literal(v) for v in key] for key in keys]
    if any(literal is None for key in literals for literal in key):
        return None
    if len(names) == 1:
        node: Any = exp.In(this=exp.column(names[0], quoted=True), expressions=[k[0] for k in literals])
    else:
        node = exp.or_(*[exp.and_(*[exp.EQ(this=exp.column(n, quoted=True), expression=v)
                                    for n, v in zip(names, key, strict=True)])
                         for key in literals])
    return node.sql(dialect="mysql")


def repair_requests(report: VerifyReport, plan: Plan, catalog: Catalog) -> list[RepairRequest]:
    """The re-copies that make each differing table of ``report`` equal again."""
    requests = []
    for table_report in report.tables:
        if table_report.skipped or table_report.equal:
            continue
        name = table_report.source_table
        table = plan.table(name)
        differences = table_report.differences
        count = len(differences)
        whole = None
        if any(d.kind in ("extra", "duplicate") for d in differences):
            whole = ("keys the target has that the source lacks: a conditional copy removes "
                     "nothing, a whole-table copy removes them")
        elif count > MAX_KEYS:
            whole = f"{count} keys, more than {MAX_KEYS}"
        elif any(c.mask for c in table.key_columns):
            whole = "a masked key cannot be looked up in MySQL"
        where = None
        if whole is None:
            source_table = catalog.table(*name.split(".", 1))
            assert source_table is not None
            names = list(differences[0].key)
            condition = _keys_condition(names, [tuple(d.key.values()) for d in differences])
            if condition is None:
                whole = "a key value with no SQL literal"
            else:
                where = condition_sql(condition, source_table)
        requests.append(RepairRequest(
            name, where, count,
            whole or f"{count} missing or different key(s)"))
    return requests
