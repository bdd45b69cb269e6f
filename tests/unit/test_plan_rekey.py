"""A target that declares another primary key than the plan's gets the plan's
(``plan.program.key_changes``): DuckDB, which enforces it, rebuilds the table in one
transaction, every column kept; Snowflake replaces the declared key in place."""

from __future__ import annotations

import duckdb

from replicator.plan import DUCKDB, SNOWFLAKE, build_plan, program
from replicator.plan.program import setup_program
from replicator.plan.statements.names import target_name
from replicator.plan.statements.tables import existing_primary_key
from tests.fixtures.sink_sample import CATALOG, sample_pipeline


def _regions():
    return build_plan(sample_pipeline("duckdb"), CATALOG).table("shop.regions")


def test_the_rebuild_runs_only_when_the_enforced_key_differs():
    table = _regions()
    planned = [c.target_column for c in table.key_columns]
    assert program.key_changes(table, DUCKDB, None) == []
    assert program.key_changes(table, DUCKDB, [name.lower() for name in planned]) == []
    rebuild = [s.sql for s in program.key_changes(table, DUCKDB, planned[:1])]
    assert rebuild[0] == "BEGIN TRANSACTION" and rebuild[-1] == "COMMIT"
    assert any("ADD PRIMARY KEY" in sql for sql in rebuild)
    assert [s.role for s in setup_program(table, SNOWFLAKE)].count("key") == 1
    assert [s.role for s in setup_program(table, DUCKDB)].count("key") == 1


def test_snowflake_replaces_the_declared_key_in_place():
    table = _regions()
    planned = [c.target_column for c in table.key_columns]
    name = target_name(table, SNOWFLAKE)
    assert program.key_changes(table, SNOWFLAKE, None) == []
    assert program.key_changes(table, SNOWFLAKE, planned) == []
    key = ", ".join(f'"{n}"' for n in planned)
    assert [s.sql for s in program.key_changes(table, SNOWFLAKE, planned[:1])] == [
        f"ALTER TABLE {name} DROP PRIMARY KEY", f"ALTER TABLE {name} ADD PRIMARY KEY ({key})"]
    read = next(s for s in setup_program(table, SNOWFLAKE) if s.role == "key")
    assert read.sql == f"SHOW PRIMARY KEYS IN TABLE {name}"
    columns = ["created_on", "database_name", "schema_name", "table_name", "column_name",
               "key_sequence", "constraint_name", "rely", "comment"]
    rows = [(None, "D", "S", "T", "B", 2, "PK", "false", None),
            (None, "D", "S", "T", "A", 1, "PK", "false", None)]
    assert existing_primary_key(rows, columns, SNOWFLAKE) == ["A", "B"]
    assert existing_primary_key([], columns, SNOWFLAKE) is None
    assert existing_primary_key([(["X", "Y"],)], ["constraint_column_names"], DUCKDB) == [
        "X", "Y"]


def test_the_rebuild_keeps_every_column_and_one_row_per_new_key():
    table = _regions()
    key = [c.target_column for c in table.key_columns]
    assert len(key) == 2, key  # (REGION, ID): the old target enforced ID alone
    connection = duckdb.connect()
    for statement in setup_program(table, DUCKDB):
        if statement.role == "run":
            connection.execute(statement.sql)
    name = target_name(table, DUCKDB)
    columns = [row[0] for row in connection.execute(f"DESCRIBE {name}").fetchall()]
    connection.execute(f"DROP TABLE {name}")
    definition = ", ".join(f'"{c}" VARCHAR' for c in columns)
    connection.execute(f'CREATE TABLE {name} ({definition}, "EXTRA" VARCHAR, '
                       f'PRIMARY KEY ("{key[1]}"))')
    connection.execute(f'INSERT INTO {name} ("{key[0]}", "{key[1]}", "EXTRA") VALUES '
                       "('eu', '1', 'kept'), (NULL, '2', 'incomplete key')")
    statement = next(s for s in setup_program(table, DUCKDB) if s.role == "key")
    enforced = connection.execute(statement.sql, list(statement.params)).fetchone()[0]
    assert enforced == [key[1]]
    for rebuild in program.key_changes(table, DUCKDB, enforced):
        connection.execute(rebuild.sql)
    assert connection.execute(statement.sql, list(statement.params)).fetchone()[0] == key
    assert connection.execute(f'SELECT "EXTRA" FROM {name}').fetchall() == [("kept",)]


def test_plan_ddl_prints_the_key_statements_run_executes():
    from replicator.cli.plan_ddl import preview_ddl

    ddl = "ALTER TABLE shop.regions DROP PRIMARY KEY, ADD PRIMARY KEY (id)"
    pipeline = sample_pipeline("snowflake")
    plan = build_plan(pipeline, CATALOG)
    (effect,) = preview_ddl(pipeline, CATALOG, plan, ddl, SNOWFLAKE)
    name = target_name(plan.table("shop.regions"), SNOWFLAKE)
    assert effect.action == "recopy"
    assert effect.statements == [f"ALTER TABLE {name} DROP PRIMARY KEY",
                                 f'ALTER TABLE {name} ADD PRIMARY KEY ("ID")']
    pipeline = sample_pipeline("duckdb")
    (effect,) = preview_ddl(pipeline, CATALOG, build_plan(pipeline, CATALOG), ddl, DUCKDB)
    assert effect.statements[0] == "BEGIN TRANSACTION" and effect.statements.count("COMMIT") == 1
