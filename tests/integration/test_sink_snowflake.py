"""The Snowflake sink's SQL on fakesnow: every statement runs and the target converges exactly."""

from __future__ import annotations

import datetime as dt

import pytest

from replicator.plan import SNOWFLAKE, build_plan
from replicator.plan.statements.names import target_name
from replicator.sink import open_sink
from tests.fixtures.sink_sample import (
    CATALOG,
    normalize,
    parse_json_columns,
    run_scenario,
    sample_pipeline,
    scenario,
)

fakesnow = pytest.importorskip("fakesnow")


def read_target(connection, plan, target_table):
    table = plan.table(target_table)
    key = ", ".join(f'"{c}"' for c in table.target_key)
    cursor = connection.cursor()
    cursor.execute(f"SELECT * FROM {target_name(table, SNOWFLAKE)} ORDER BY {key}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, map(normalize, row), strict=True)) for row in cursor.fetchall()]
    return parse_json_columns(table, rows)


@pytest.fixture()
def snowflake_sink():
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        plan = build_plan(pipeline, CATALOG)
        sink = open_sink(pipeline, plan)
        sink.prepare()
        yield sink, plan
        sink.close()


def test_scripted_batches_leave_exactly_the_expected_rows(snowflake_sink):
    sink, plan = snowflake_sink
    before = dt.datetime.now(dt.UTC)
    results, expected = run_scenario(sink, plan)
    assert [r.skipped for r in results] == [False, False, True, True, False, False, False]
    for target_table, rows in expected.items():
        actual = read_target(sink.connection, plan, target_table)
        for row in actual:
            synced = row.pop("_SYNCED_AT", before)
            assert synced >= before - dt.timedelta(seconds=1)
        for got, want in zip(actual, rows, strict=False):
            assert {k: v for k, v in got.items() if want.get(k) != v} == {}, target_table
        assert actual == rows, target_table


def test_replay_is_a_noop_and_last_applied_is_recorded(snowflake_sink):
    sink, plan = snowflake_sink
    from tests.fixtures.row_transforms import stage_events

    run_scenario(sink, plan)
    table = plan.table("shop.regions")
    first = read_target(sink.connection, plan, "REGION STOCK")
    batches, _ = scenario()
    batch_id, by_table = batches[-1]
    assert sink.apply(table, batch_id, {}, stage_events(table, by_table["shop.regions"])).skipped
    assert read_target(sink.connection, plan, "REGION STOCK") == first
    last = sink.last_applied(table)
    assert last["batch_id"] == 4 and last["end_offset"] == {"file": "f", "pos": 4}


def test_prepare_adds_columns_added_to_the_source():
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import STRING

    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        plan = build_plan(pipeline, CATALOG)
        sink = open_sink(pipeline, plan)
        sink.prepare()
        table = plan.tables[1]
        added = (
            PlannedColumn(target_column="NEW col", target_type=STRING, source_column="new col"),
            PlannedColumn(target_column="N2", target_type=STRING, source_column="n2"),
        )
        grown = type(plan)(
            pipeline_name=plan.pipeline_name,
            target_kind=plan.target_kind,
            tables=(plan.tables[0],
                    type(table)(**{**table.__dict__, "columns": (*table.columns, *added)})),
        )
        grown_sink = type(sink)(pipeline, grown, connection=sink.connection)
        grown_sink.prepare()
        grown_sink.prepare()  # idempotent
        cursor = sink.connection.cursor()
        cursor.execute(f"SELECT * FROM {target_name(table, SNOWFLAKE)} LIMIT 0")
        names = [d[0] for d in cursor.description]
        sink.close()
    assert [n.upper() for n in names[-2:]] == ["NEW COL", "N2"]


def test_connection_parameters_precedence_and_auth():
    from replicator.model.pipeline import SnowflakeTarget
    from replicator.sink.snowflake import connection_parameters, redacted

    environ = {"SNOWFLAKE_ACCOUNT": "env-acct", "SNOWFLAKE_USER": "env-user",
               "SNOWFLAKE_WAREHOUSE": "ENV_WH", "SNOWFLAKE_PASSWORD": "env-secret"}
    named = {"account": "named-acct", "user": "named-user", "role": "NAMED_ROLE",
             "session_parameters": {"TIMEZONE": "UTC"}}
    target = SnowflakeTarget(database="DB", schema="S", user="yaml-user",
                             private_key_file="/keys/rsa.p8", private_key_file_pwd="pp")
    params = connection_parameters(target, "orders", named=named, environ=environ)
    assert params["account"] == "named-acct"  # named connection beats the environment
    assert params["user"] == "yaml-user"  # the YAML beats both
    assert params["warehouse"] == "ENV_WH" and params["role"] == "NAMED_ROLE"
    assert params["authenticator"] == "SNOWFLAKE_JWT"
    assert params["private_key_file"] == "/keys/rsa.p8" and params["private_key_file_pwd"] == "pp"
    assert (params["database"], params["schema"]) == ("DB", "S")
    assert params["application"] == "replicator" and params["paramstyle"] == "qmark"
    assert params["autocommit"] is False
    assert params["client_session_keep_alive"] is True  # sessions outlive 4 idle hours
    assert params["session_parameters"] == {"TIMEZONE": "UTC", "QUERY_TAG": "replicator:orders"}
    shown = str(redacted(params))
    assert "env-secret" not in shown and "'pp'" not in shown


def test_token_auth_defaults_to_oauth_and_account_is_required():
    from replicator.errors import SinkError
    from replicator.model.pipeline import SnowflakeTarget
    from replicator.sink.snowflake import connection_parameters

    params = connection_parameters(
        SnowflakeTarget(database="DB", schema="S", account="a", token="t0k"), "p", environ={}
    )
    assert (params["authenticator"], params["token"]) == ("oauth", "t0k")
    with pytest.raises(SinkError) as caught:
        connection_parameters(SnowflakeTarget(database="DB", schema="S"), "p", environ={})
    assert "connections.toml" in caught.value.hint and "SNOWFLAKE_ACCOUNT" in caught.value.hint


def test_errors_are_sorted_into_transient_and_terminal():
    from snowflake.connector import errors

    from replicator.errors import TransientSinkError
    from replicator.sink.snowflake import _sink_error

    assert isinstance(_sink_error(errors.OperationalError(msg="connection reset"), "x"),
                      TransientSinkError)
    denied = _sink_error(errors.ProgrammingError(msg="does not exist or not authorized",
                                                 errno=2003), "x")
    assert not denied.transient and "GRANT" in denied.hint.upper()
    login = _sink_error(errors.DatabaseError(msg="Incorrect username or password", errno=390100),
                        "x")
    assert not login.transient and "password" in login.hint
    gone = _sink_error(errors.HttpError(msg="401 Unauthorized", errno=290401), "x")
    assert gone.transient and "new session" in gone.hint
    account = _sink_error(errors.ForbiddenError(), "x")
    assert not account.transient and "account identifier" in account.hint


@pytest.mark.parametrize(("errno", "text", "transient", "fix"), [
    (606, "No active warehouse selected in the current session.  Select an active warehouse "
          "with the 'use warehouse' command.", False, "GRANT USAGE ON WAREHOUSE"),
    (606, "Warehouse 'LOAD_WH' is suspended. Resume it or enable auto-resume.", False,
     "AUTO_RESUME = TRUE"),
    (90064, "Warehouse 'LOAD_WH' cannot be resumed because resource monitor 'RM' has exceeded "
            "its quota.", False, "CREDIT_QUOTA"),
    (608, "Warehouse 'LOAD_WH' is being resized; the statement could not be scheduled.", True,
     "resizing"),
    (630, "Statement reached its statement or warehouse timeout of 600 second(s) and was "
          "canceled.", True, "STATEMENT_TIMEOUT_IN_SECONDS"),
    (603, "SQL execution internal error: Processing aborted due to error 300010:391167117",
     True, "retried"),
    (1003, "SQL compilation error: syntax error line 1 at position 7 unexpected 'MERGEX'.",
     False, "replicator plan"),
    (904, "SQL compilation error: error line 1 at position 40 invalid identifier 'X'", False,
     "CREATE TABLE"),
])
def test_warehouse_errors_are_classified_with_their_fix(errno, text, transient, fix):
    from snowflake.connector import errors

    from replicator.sink.snowflake import _sink_error

    error = _sink_error(errors.ProgrammingError(msg=text, errno=errno), "apply batch 3 to ORDERS")
    assert error.transient is transient
    assert fix in error.hint
    assert text in error.message and "apply batch 3 to ORDERS" in error.message
