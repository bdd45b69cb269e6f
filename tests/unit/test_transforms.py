"""Transforms without Spark or a server: masks, computed columns through planning, staging and
verify's normalisation, validate's positions inside YAML scalars, and the salt staying secret.
(Spark semantics themselves: tests/integration/test_transforms_spark_differential.py.)"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from decimal import Decimal
from pathlib import Path

import pytest

from replicator.config import check_document, load_pipeline
from replicator.errors import PlanError
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan, offline_catalog
from replicator.plan.expressions.checker import check_expression
from replicator.plan.expressions.errors import EvaluationError, ExpressionError
from replicator.plan.expressions.spark_types import BIGINT, INT, STRING, decimal
from replicator.transform import change_batch, stage_batch
from replicator.transform.stage import batch_key
from replicator.verify.normalize import source_row_forms
from tests.fixtures.row_transforms import staged_value_of

ROOT = Path(__file__).resolve().parents[2]
SALT = "pepper 😀 'x'"


def _pipeline():
    return load_pipeline(ROOT / "pipelines" / "transforms.yaml", environ={"PII_SALT": SALT})


def _plan(pipeline=None):
    pipeline = pipeline or _pipeline()
    return build_plan(pipeline, offline_catalog(pipeline)).table("crm.customers")


def _event(op, before=None, after=None, index=0):
    return ChangeEvent(table="crm.customers", op=op, position=BinlogPosition("mysql-bin.000001", 4),
                       row_index=index, ts_ms=1_700_000_000_000, before=before, after=after)


def _staged(table, events):
    """The staging rows of ``events``, as replication stages them (``transform.stage_batch``)."""
    source = offline_catalog(_pipeline()).table("crm", "customers").columns
    batch = change_batch(events, [(c.name, c.mysql_type) for c in source], batch_key(table))
    return stage_batch(table, batch)


ROW = {"id": 7, "first_name": "Zoë", "last_name": None, "kind": "person", "email": "A@B.example",
       "card_number": "4111111111111234", "phone": "+47 555", "birth_date": dt.date(1990, 1, 31),
       "net_amount": Decimal("10.55"), "created_at": dt.datetime(2024, 3, 15, 10, 11, 12, 5)}


def test_masks_and_computed_columns_are_staged_as_specified() -> None:
    table = _plan()
    rows = _staged(table, [_event("r", after=ROW)]).to_pylist()
    assert len(rows) == 1
    row = rows[0]
    assert row["EMAIL"] == hashlib.sha256((SALT + "A@B.example").encode()).hexdigest()
    assert row["CARD_NUMBER"] == "************1234"
    assert row["PHONE"] == "+47"
    assert row["BIRTH_DATE"] is None
    assert row["FULL_NAME"] == "Zoë"  # concat_ws skips the NULL last name
    assert row["TOTAL_WITH_TAX"] == Decimal("12.66")  # 12.660 rounded HALF_UP to NUMBER(14,2)
    assert row["SIGNUP_MONTH"] == "2024-03"
    assert row["EMAIL_DOMAIN"] == "b.example"


def test_null_stays_null_under_every_mask_and_none_text_is_text() -> None:
    table = _plan()
    nulls = dict(ROW, email=None, card_number=None, phone=None, net_amount=None, created_at=None)
    texts = dict(ROW, id=8, email="None", card_number="None", phone="None")
    rows = _staged(table, [_event("r", after=nulls), _event("r", after=texts, index=1)]).to_pylist()
    by_id = {r["ID"]: r for r in rows}
    assert [by_id[7][k] for k in ("EMAIL", "CARD_NUMBER", "PHONE", "TOTAL_WITH_TAX",
                                  "SIGNUP_MONTH", "EMAIL_DOMAIN")] == [None] * 6
    assert by_id[8]["EMAIL"] == hashlib.sha256((SALT + "None").encode()).hexdigest()
    assert by_id[8]["CARD_NUMBER"] == "None"[:0] + "****"  # 4 characters or fewer: all stars
    assert by_id[8]["PHONE"] == "Non"


@pytest.mark.parametrize("mask,keep,length,value,expected", [
    ("redact", 4, None, "12345", "*2345"),
    ("redact", 4, None, "", ""),
    ("redact", 2, None, Decimal("12.50"), "***50"),  # over the text MySQL prints
    ("redact", 2, None, b"\x01\xff", "**ff"),  # binary: over its hex
    ("redact", None, None, "anything", "***"),
    ("truncate", None, 2, "😀é", "😀é"),
    ("truncate", None, 1, "😀é", "😀"),  # characters, not bytes
])
def test_mask_values(mask, keep, length, value, expected) -> None:
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import STRING as TARGET_STRING

    column = PlannedColumn("C", TARGET_STRING, source_column="c", mask=mask,
                           mask_keep_last=keep, mask_length=length)
    assert staged_value_of(column, value) == expected
    assert staged_value_of(column, None) is None


def test_truncate_keeps_bytes_of_a_binary_column() -> None:
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import BINARY

    column = PlannedColumn("C", BINARY, source_column="c", mask="truncate", mask_length=2,
                           mysql_type=MySQLType.parse("varbinary(10)"))
    assert staged_value_of(column, b"\x00\x01\x02") == b"\x00\x01"


def test_the_salt_is_never_shown() -> None:
    pipeline = _pipeline()
    table = _plan(pipeline)
    email = table.column("EMAIL")
    assert email.mask_salt == SALT
    for text in (repr(pipeline), repr(table), repr(email), str(table.columns)):
        assert SALT not in text and "pepper" not in text


def test_verify_computes_the_same_values_from_source_rows() -> None:
    table = _plan()
    staged = _staged(table, [_event("r", after=ROW)]).to_pylist()[0]
    columns = table.data_columns
    source = offline_catalog(_pipeline()).table("crm", "customers").columns
    [(form, passes)] = source_row_forms(table, columns, [ROW], [(c.name, c.mysql_type) for c in source])
    assert passes
    assert form == tuple(staged[c.staging_name] for c in columns)


def test_a_row_spark_would_fail_stops_the_batch_naming_table_column_and_key() -> None:
    pipeline = _pipeline()
    tables = []
    for table in pipeline.tables:
        ratio = dataclasses.replace(next(c for c in table.columns if c.computed),
                                    source_column="ratio", expression="net_amount / 0",
                                    target_type="DOUBLE")
        columns = (*(c for c in table.columns if not c.computed), ratio)
        tables.append(dataclasses.replace(table, columns=columns))
    table = _plan(dataclasses.replace(pipeline, tables=tuple(tables)))
    with pytest.raises(EvaluationError) as caught:
        _staged(table, [_event("r", after=ROW)])
    assert caught.value.error_class == "DIVIDE_BY_ZERO"
    assert "crm.customers" in caught.value.message and "RATIO" in caught.value.message
    assert "id=7" in caught.value.message


def _live_catalog(*names):
    columns = tuple(SourceColumn(name=n, mysql_type=MySQLType.parse(t), nullable=True, ordinal=i)
                    for i, (n, t) in enumerate(names, start=1))
    return Catalog(tables=(SourceTable(database="crm", table="customers", columns=columns,
                                       primary_key=("id",)),), live=True)


def test_plan_against_the_live_schema_names_table_column_and_yaml_place() -> None:
    pipeline = _pipeline()
    catalog = _live_catalog(("id", "bigint"), ("first_name", "varchar(100)"), ("last_name", "text"),
                            ("kind", "varchar(10)"), ("email", "text"), ("card_number", "text"),
                            ("phone", "text"), ("birth_date", "date"), ("created_at", "datetime"))
    with pytest.raises(PlanError) as caught:  # net_amount is gone from MySQL
        build_plan(pipeline, catalog)
    message = caught.value.message
    assert "crm.customers" in message and "total_with_tax" in message
    assert "unknown column 'net_amount'" in message
    assert "transforms.yaml: tables[0].columns.total_with_tax.expression" in message


def test_computed_column_named_like_a_source_column_is_refused_by_plan() -> None:
    pipeline = _pipeline()
    table = pipeline.tables[0]
    clash = dataclasses.replace(next(c for c in table.columns if c.computed), source_column="KIND")
    pipeline = dataclasses.replace(pipeline, tables=(dataclasses.replace(
        table, columns=(*table.columns, clash)),))
    with pytest.raises(PlanError, match="has the name of source column 'kind'"):
        build_plan(pipeline, offline_catalog(pipeline))


@pytest.mark.parametrize("text,types,result_type,value", [
    ("1.2 * d", {"d": decimal(10, 2)}, decimal(13, 3), Decimal("12.660")),  # p1 + p2 + 1
    ("d / 2", {"d": decimal(4, 2)}, decimal(8, 6), Decimal("5.275000")),
    ("i / 2", {"i": INT}, None, 3.5),  # int / int is DOUBLE
    ("concat(s, i)", {"s": STRING, "i": BIGINT}, STRING, "x7"),
    ("s NOT LIKE 'x%'", {"s": STRING}, None, False),  # sqlglot: Like(negate=True), once read as LIKE
    ("s NOT LIKE 'y%'", {"s": STRING}, None, True),
])
def test_expression_types(text, types, result_type, value) -> None:
    from tests.fixtures.row_transforms import duckdb_values

    row = {"d": Decimal("10.55"), "i": 7, "s": "x"}
    if result_type is not None:
        assert check_expression(text, types) == result_type
    [computed] = duckdb_values(text, types, [row])  # the engine's value (the product's SQL)
    assert computed == value
    if isinstance(value, Decimal):
        assert computed.as_tuple().exponent == value.as_tuple().exponent  # and Spark's scale


def test_unsupported_and_non_deterministic_functions_are_refused_with_an_offset() -> None:
    with pytest.raises(ExpressionError) as caught:
        check_expression("upper(s) || rand()", {"s": STRING})
    assert caught.value.offset == 12
    with pytest.raises(ExpressionError, match="current_date"):
        check_expression("current_date()", {})


def _diagnostics(tmp_path, body):
    path = tmp_path / "p.yaml"
    path.write_text("version: 1\nsource: {mysql: {host: h, password: \"${P:-}\"}}\n"
                    "target: {duckdb: {path: w.duckdb}}\ntables:\n  - source: crm.t\n"
                    "    key: [id]\n    columns:\n      id: {source_type: int}\n" + body)
    return [(d.code, d.line, d.col) for d in check_document(path, environ={}).diagnostics]


def test_positions_point_inside_plain_quoted_and_block_scalars(tmp_path) -> None:
    assert _diagnostics(tmp_path, "      a: {expression: \"id + nope\", type: INT}\n") == [("R242", 9, 29)]
    assert _diagnostics(tmp_path, "      a: {expression: 'id || ''x'' || nope', type: VARCHAR}\n") == [
        ("R242", 9, 39)]
    assert _diagnostics(tmp_path, "      a:\n        type: INT\n        expression: >\n"
                                  "          id +\n            nope\n") == [("R242", 13, 13)]
    assert _diagnostics(tmp_path, "      a: {expression: id + nope, type: INT}\n") == [("R242", 9, 28)]


def test_scd2_tracks_computed_columns_by_their_value() -> None:
    """scd2 versions compare the tracked columns, computed ones included: by the value the
    transform step computed (they are no column of the change batch)."""
    pipeline = _pipeline()
    pipeline = dataclasses.replace(pipeline, tables=tuple(
        dataclasses.replace(t, mode="scd2") for t in pipeline.tables))
    table = _plan(pipeline)
    assert any(c.expression for c in table.tracked_columns)
    renamed = dict(ROW, first_name="Zoe")  # FULL_NAME changes: a new version
    same = dict(renamed)  # nothing tracked changes: folded into the version before
    events = [_event("r", after=ROW), _event("u", before=ROW, after=renamed, index=1),
              _event("u", before=renamed, after=same, index=2)]
    staged = _staged(table, events)
    assert [(r["FULL_NAME"], r["_REPLICATOR_OP"]) for r in staged.to_pylist()] == [
        ("Zoë", "r"), ("Zoe", "u")]


def test_a_constant_spark_cannot_cast_fails_when_the_engine_runs_it() -> None:
    """Nothing is evaluated at plan time (issue 17): a CAST of a literal that Spark would fail
    is planned, and the transform step stops the batch with Spark's error class, naming the
    table, the column and the row (the plan-time folding that caught it before is gone)."""
    pipeline = _pipeline()
    tables = []
    for table in pipeline.tables:
        bad = dataclasses.replace(next(c for c in table.columns if c.computed),
                                  source_column="bad", expression="id + CAST('abc' AS INT)",
                                  target_type="BIGINT")
        tables.append(dataclasses.replace(table, columns=(*table.columns, bad)))
    table = _plan(dataclasses.replace(pipeline, tables=tuple(tables)))
    assert _staged(table, []).num_rows == 0  # the constant alone fails no batch
    with pytest.raises(EvaluationError) as caught:
        _staged(table, [_event("r", after=ROW)])
    assert caught.value.error_class == "CAST_INVALID_INPUT"
    assert "BAD" in caught.value.message and "id=7" in caught.value.message
    assert "try_cast" in caught.value.hint


@pytest.mark.parametrize("text", ["d > DATE '2024-13-45'", "d = '2024-02-30'",
                                  "CAST('not a time' AS TIMESTAMP) > d"])
def test_a_date_literal_that_reads_as_no_date_is_refused_by_the_checker(text) -> None:
    from replicator.plan.expressions.checker import check_filter
    from replicator.plan.expressions.spark_types import DATE

    with pytest.raises(ExpressionError, match="is not a"):
        check_filter(text, {"d": DATE})
