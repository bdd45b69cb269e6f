"""verify's canonical forms: values that mean the same compare equal, others never do."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from replicator.model.catalog import MySQLType
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.types import TargetType
from replicator.verify.normalize import (
    canonical,
    jsonable,
    keeps_key_order,
    source_parameter,
    source_row_forms,
)
from replicator.verify.report import ColumnDifference, KeyDifference, TableReport, VerifyReport
from replicator.verify.target_side import _range_condition

UTC = dt.UTC


def column(kind: str, mysql: str, *, mask=None, name="C", **type_args) -> PlannedColumn:
    return PlannedColumn(target_column=name, target_type=TargetType(kind, **type_args),
                         source_column=name.lower(), mysql_type=MySQLType.parse(mysql), mask=mask)


def test_decimal_scale_and_driver_spellings_agree():
    amount = column("decimal", "decimal(12,2)", precision=12, scale=2)
    assert canonical(amount, Decimal("1.1")) == canonical(amount, Decimal("1.10"))
    assert repr(canonical(amount, Decimal("1.1"))) == repr(canonical(amount, Decimal("1.10")))
    assert canonical(amount, Decimal("1.11")) != canonical(amount, Decimal("1.10"))
    unsigned = column("integer", "bigint unsigned")
    assert canonical(unsigned, Decimal("18446744073709551615")) == 2**64 - 1


def test_timestamps_compare_as_instants():
    ts = column("timestamp_tz", "timestamp(6)", fsp=6)
    aware = dt.datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
    paris = aware.astimezone(dt.timezone(dt.timedelta(hours=1)))
    naive = dt.datetime(2024, 1, 1, 12, 0)  # fakesnow drops the offset; replicator writes UTC
    assert canonical(ts, aware) == canonical(ts, paris) == canonical(ts, naive)
    assert canonical(ts, aware + dt.timedelta(microseconds=1)) != canonical(ts, aware)
    ntz = column("timestamp", "datetime(6)", fsp=6)
    assert canonical(ntz, "2024-01-01 12:00:00.000001") == dt.datetime(2024, 1, 1, 12, 0, 0, 1)


def test_float_digits_are_those_of_the_float32():
    # Replication writes a FLOAT's shortest decimal (0.001234565, a tie at 7 digits); MySQL
    # prints the float32 it stands for, 0.0012345650466..., at 6 digits: 0.00123457.
    flt = column("float", "float")
    assert canonical(flt, 0.001234565) == canonical(flt, 0.00123457) == 0.00123457
    assert canonical(flt, 5.652365e16) == canonical(flt, 5.65237e16)
    assert canonical(flt, 1234565.0) == 1234560.0  # a float32 that is itself a tie: even
    assert canonical(flt, 0.00123456) != canonical(flt, 0.00123457)
    assert canonical(flt, 1e300) == 1e300  # no float32 (written outside replication): kept


def test_json_text_is_compared_as_json():
    payload = column("json", "json")
    assert canonical(payload, '{"b": [1, 2], "a": "é"}') == canonical(payload, '{\n "a":"é","b":[1,2]}')
    assert canonical(payload, '{"a": 1}') != canonical(payload, '{"a": 2}')


def test_source_form_goes_through_staging_conversion_and_masks():
    columns = [
        column("integer", "int", name="ID"),
        column("string", "varchar(200)", name="EMAIL", mask="sha256"),
        column("time_text", "time(6)", name="DURATION", fsp=6),
        column("binary", "bit(8)", name="FLAGS"),
    ]
    table = TablePlan("p", "db", "t", ("S",), "T", tuple(columns), ("id",), "primary key",
                      "hard", "T_STAGE", "T_STATE", "upper")
    source = [(c.source_column, c.mysql_type) for c in columns]
    images = [{"id": 1, "email": "a@b.c", "duration": dt.timedelta(hours=-1), "flags": 5},
              {"id": 1, "email": None, "duration": None, "flags": None}]
    (row, passes), (empty, _) = source_row_forms(table, columns, images, source)
    assert passes
    assert row[0] == 1
    assert len(row[1]) == 64 and row[1] != "a@b.c"
    assert row[2] == "-01:00:00.000000"
    assert row[3] == b"\x05"
    assert empty[1:] == (None,) * 3


def test_only_order_keeping_keys_are_cut_in_ranges():
    assert keeps_key_order([column("integer", "int"), column("timestamp", "datetime")])
    assert not keeps_key_order([column("string", "varchar(10)")])
    assert not keeps_key_order([column("string", "int", mask="sha256")])


def test_source_parameters_and_json_values():
    assert source_parameter(dt.datetime(2024, 1, 1, 13, tzinfo=dt.timezone(dt.timedelta(hours=1)))) \
        == dt.datetime(2024, 1, 1, 12)
    assert source_parameter(Decimal("18446744073709551615")) == 18446744073709551615
    assert jsonable(b"\x00\xff") == "0x00ff" and jsonable(Decimal("1.50")) == "1.50"


def test_key_ranges_are_spelled_lexicographically():
    sql, params = _range_condition(["A", "B"], [1, 2], ">")
    assert sql == '(("A" > ?) OR ("A" = ? AND "B" > ?))'
    assert params == [1, 1, 2]


def test_report_text_and_json():
    table = TableReport("db.t", "main.T", source_rows=3, target_rows=3, segments=1)
    table.differences = [
        KeyDifference("missing", {"id": 1}),
        KeyDifference("different", {"id": 2}, (ColumnDifference("NAME", "a", "b"),)),
    ]
    report = VerifyReport("p", [table])
    assert not report.equal
    text = "\n".join(report.describe())
    assert "1 missing, 0 extra, 1 different" in text and "NAME: source 'a' != target 'b'" in text
    data = report.to_dict()
    assert data["tables"][0]["differences"][1] == {
        "kind": "different", "key": {"id": 2},
        "columns": [{"column": "NAME", "source": "a", "target": "b"}],
    }
