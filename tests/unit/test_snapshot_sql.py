"""The snapshot's chunk predicates and the typed literals its connectorx reader binds."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from replicator.source.snapshot import key_range_sql
from replicator.source.snapshot_columns import sql_literal


def test_composite_bounds_use_the_expanded_form():
    params: list[object] = []

    def bind(value):
        params.append(value)
        return "%s"

    sql = key_range_sql(("a", "b"), (1, "x"), (5, "y"), bind)
    assert sql == ("((`a` > %s) OR (`a` = %s AND `b` > %s))"
                   " AND ((`a` < %s) OR (`a` = %s AND `b` <= %s))")
    assert params == [1, 1, "x", 5, 5, "y"]
    assert key_range_sql(("id",), None, (9,), bind) == "`id` <= %s"
    assert key_range_sql(("id",), None, None, bind) == ""


def test_literals_come_from_typed_values_and_need_no_escaping():
    assert sql_literal(18446744073709551615) == "18446744073709551615"
    assert sql_literal(True) == "1"
    assert sql_literal(Decimal("-1E-30")) == "-0.000000000000000000000000000001"
    assert sql_literal(dt.datetime(2024, 1, 2, 3, 4, 5, 6)) == "'2024-01-02 03:04:05.000006'"
    assert sql_literal(dt.date(2024, 1, 2)) == "'2024-01-02'"
    assert sql_literal(-dt.timedelta(hours=838, minutes=59, seconds=59)) == "'-838:59:59.000000'"
    hostile = "x'; DROP TABLE t; -- \\ 😀"
    assert sql_literal(hostile) == "_utf8mb4 X'" + hostile.encode().hex() + "'"
    assert "'" not in sql_literal(hostile).split("X'", 1)[1][:-1]
    assert sql_literal(b"\x00'") == "X'0027'"
    with pytest.raises(ValueError):
        sql_literal(Decimal("NaN"))
    with pytest.raises(TypeError):
        sql_literal(object())
