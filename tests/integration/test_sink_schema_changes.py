"""The target statements of followed schema changes, on DuckDB and on fakesnow (issue 18).

Rows are put into the target first (plain INSERTs: what is tested is the DDL, not a MERGE);
then the statements `plan --ddl` shows run through the sink, and the target is read back: an
added column's DEFAULT fills the rows already there, a widened column takes a value the old
type could not hold, a renamed column keeps its data, a kept column accepts NULL, a dropped
one is gone, and running them again (a replayed batch) is harmless where the applier does.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from replicator.model.catalog import MySQLType
from replicator.plan import build_plan, offline_catalog
from replicator.plan.model import PlannedColumn
from replicator.plan.program import Statement
from replicator.plan.statements import ddl, names
from replicator.plan.types import TargetType, integer, map_mysql_type
from tests.integration.test_sink_program import modes_pipeline, target  # noqa: F401 (fixture)


def _run(sink, text):
    cursor = sink.connection.inner.cursor()
    cursor.execute(text)
    rows = cursor.fetchall() if cursor.description else None
    if sink.dialect.implicit_transactions:
        cursor.execute("COMMIT")
    return rows


def test_followed_schema_changes_run_on_the_target(target):  # noqa: F811 (the fixture)
    dialect, warehouse, sink_for = target
    pipeline = modes_pipeline(warehouse)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    orders = plan.table("shop.orders")
    sink = sink_for(pipeline, plan)
    sink.prepare()
    name = names.target_name(orders, dialect)
    _run(sink, f'INSERT INTO {name} ("ID", "CUSTOMER_ID", "STATUS", "AMOUNT") '
               "VALUES (1, 10, 'a', 1.50), (2, 20, 'b', 2.50)")

    # An added column with a DEFAULT (the catalog's text, as MariaDB writes it).
    x = PlannedColumn(target_column="X", target_type=integer(10, 32), source_column="x",
                      mysql_type=MySQLType.parse("int"), source_default="7")
    label = PlannedColumn(target_column="LABEL", target_type=TargetType("string"),
                          source_column="label", mysql_type=MySQLType.parse("varchar(20)"),
                          source_default="'it''s \\ new'")
    grown_table = dataclasses.replace(orders, columns=(*orders.columns, x, label))
    grown = dataclasses.replace(plan, tables=(grown_table,))
    grown_sink = type(sink)(pipeline, grown, connection=sink.connection)
    grown_sink.prepare()
    assert _run(sink, f'SELECT "ID", "X", "LABEL" FROM {name} ORDER BY "ID"') == [
        (1, 7, "it's \\ new"), (2, 7, "it's \\ new")]

    # INT -> BIGINT, DECIMAL(12,2) -> DECIMAL(16,2): a setup on the widened plan widens the
    # target in place (it reads the target's types), and running it again changes nothing.
    wide = map_mysql_type(MySQLType.parse("decimal(16,2)"))
    widened_table = dataclasses.replace(grown_table, columns=tuple(
        dataclasses.replace(c, target_type=integer(19, 64)) if c.target_column == "X"
        else dataclasses.replace(c, target_type=wide) if c.target_column == "AMOUNT" else c
        for c in grown_table.columns))
    widened_sink = type(sink)(pipeline, dataclasses.replace(plan, tables=(widened_table,)),
                              connection=sink.connection)
    sink.connection.take()
    widened_sink.prepare()
    assert sum("SET DATA TYPE" in text for text, _ in sink.connection.take()) == 2
    widened_sink.prepare()
    assert not any("SET DATA TYPE" in text for text, _ in sink.connection.take())
    _run(sink, f'UPDATE {name} SET "X" = 5000000000, "AMOUNT" = 12345678901234.56 '
               'WHERE "ID" = 2')
    assert _run(sink, f'SELECT "X", "AMOUNT" FROM {name} WHERE "ID" = 2') == [
        (5000000000, Decimal("12345678901234.56"))]

    # A rename keeps the data; a kept column takes NULL; a dropped one is gone.
    grown_sink.execute(grown_table, [
        Statement("rename", ddl.rename_column(grown_table, "STATUS", "STATE", dialect)),
        Statement("keep", ddl.drop_not_null(grown_table, "CUSTOMER_ID", dialect)),
        Statement("drop", ddl.drop_column(grown_table, "LABEL", dialect)),
    ])
    have = grown_sink.existing_columns(grown_table)
    assert {"state", "customer_id", "x"} <= have and not {"status", "label"} & have
    _run(sink, f'INSERT INTO {name} ("ID", "STATE", "AMOUNT") VALUES (3, \'c\', 0)')
    assert _run(sink, f'SELECT "ID", "STATE", "CUSTOMER_ID" FROM {name} ORDER BY "ID"') == [
        (1, "a", 10), (2, "b", 20), (3, "c", None)]
    # A NOT NULL target column the plan no longer writes (dropped in MySQL, kept by
    # drop_column: ignore) is relaxed by the setup: inserts without it work.
    _run(sink, f'ALTER TABLE {name} ALTER COLUMN "X" SET NOT NULL')
    without_x = dataclasses.replace(grown_table, columns=tuple(
        c for c in grown_table.columns if c.target_column not in ("X", "LABEL", "STATUS")))
    type(sink)(pipeline, dataclasses.replace(plan, tables=(without_x,)),
               connection=sink.connection).prepare()
    _run(sink, f'INSERT INTO {name} ("ID", "STATE", "AMOUNT") VALUES (4, \'d\', 0)')
    assert _run(sink, f'SELECT "X" FROM {name} WHERE "ID" = 4') == [(None,)]
    # The log table is renamed by the same function.
    assert ddl.rename_column(grown_table, "STATUS", "STATE", dialect, log=True).startswith(
        f"ALTER TABLE {names.log_name(grown_table, dialect)} RENAME COLUMN")
    sink.close()


def test_a_type_change_re_creates_the_staging_table_in_the_new_type(target):  # noqa: F811
    """Snowflake's staging table outlives a batch: a column re-created in another type (or
    widened) needs its staging column in that type too, or the load into staging fails (or
    cuts the new values to the old type). The setup compares the staging columns' types as
    the driver describes them (numbers exactly, other kinds as "not a number") and re-creates
    the table where one differs; a staging table as the setup created it never differs, so
    no setup re-creates it for nothing."""
    from replicator.plan.program import retype_columns

    dialect, warehouse, sink_for = target
    pipeline = modes_pipeline(warehouse)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    sink = sink_for(pipeline, plan)
    sink.prepare()
    sink.prepare()  # every mode's staging layout, read back as the setup created it
    recreated = [text for text, _ in sink.connection.take() if "CREATE OR REPLACE" in text]
    assert recreated == []

    orders = plan.table("shop.orders")
    retyped = {"CUSTOMER_ID": TargetType("string"),  # a number becomes text
               "AMOUNT": TargetType("decimal", precision=14, scale=4)}  # another scale
    new_orders = dataclasses.replace(orders, columns=tuple(
        dataclasses.replace(c, target_type=retyped[c.target_column])
        if c.target_column in retyped else c for c in orders.columns))
    sink.execute(new_orders, retype_columns(
        new_orders, [c for c in new_orders.columns if c.target_column in retyped], dialect))
    new_plan = dataclasses.replace(plan, tables=(new_orders,))
    new_sink = type(sink)(pipeline, new_plan, connection=sink.connection)
    sink.connection.take()
    new_sink.prepare()
    recreated = [text for text, _ in sink.connection.take() if "CREATE OR REPLACE" in text]
    if dialect.staging_per_batch:  # DuckDB: each batch creates its own
        assert recreated == []
        return
    assert len(recreated) == 1 and names.staging_name(new_orders, dialect) in recreated[0]
    cursor = sink.connection.inner.cursor()
    cursor.execute(f"SELECT * FROM {names.staging_name(new_orders, dialect)} LIMIT 0")
    staged = {c[0].lower(): new_sink.described_type(c) for c in cursor.description}
    cursor.execute("COMMIT")
    assert staged["customer_id"] is None and staged["amount"] == "NUMBER(14,4)"
    new_sink.prepare()  # and once in the new types, it stays
    assert not any("CREATE OR REPLACE" in text for text, _ in sink.connection.take())
    sink.close()
