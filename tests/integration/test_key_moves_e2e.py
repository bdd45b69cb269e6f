"""Updates that change the primary key, end to end (real MariaDB -> local Spark -> DuckDB) in
the modes that record deletes: changelog, a merged table's log table, scd2.

Such an update is a delete of the old row plus an insert of the new one. The delete half must
carry the OLD row (every column, awkward values included), not the new row with the old key,
and a row filter must judge the old row: a row that never matched logs no delete, a row that
matched logs its delete even when the new row fails the filter. Each expected old row is read
from MariaDB before the move (verify's reader and canonical forms), so the comparison is
source against target, column by column.
"""

from __future__ import annotations

import dataclasses

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import BatchPolicy, DuckDBTarget, EngineConfig, TargetConfig
from replicator.plan import DUCKDB
from replicator.plan.statements.names import log_name, target_name
from replicator.verify.normalize import source_row_forms, target_row_form
from replicator.verify.source_side import SourceReader
from tests.integration.e2e_support import run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

COLUMNS = ("id BIGINT PRIMARY KEY, amount DECIMAL(30,10), at DATETIME(6), dur TIME(3), "
           "doc JSON, name VARCHAR(100) CHARACTER SET utf8mb4, raw VARBINARY(20), n INT")
TABLES = ("moves_changelog", "moves_merged", "moves_scd2")
PIPELINE = """
version: 1
name: key_moves
source:
  mysql: {host: 127.0.0.1, port: 3306, user: replicator}
target:
  duckdb: {path: "WAREHOUSE", schema: main}
tables:
  - source: DB.moves_changelog
    mode: changelog
    key: [id]
    filter: "name <> 'hidden'"
  - source: DB.moves_merged
    key: [id]
    log_table: true
  - source: DB.moves_scd2
    mode: scd2
    key: [id]
"""
# id 1: snapshotted, then moved (a delete half from a row the target already has);
# id 2: moved twice in one transaction; id 3: 'hidden' (fails the filter) moved to a shown
# row; id 4: shown, moved to a 'hidden' row; id 5: inserted and moved in the same batch.
SEED = (
    "INSERT INTO {t} VALUES (1, -12345678901234567890.0123456789, '2024-02-29 23:59:59.987654', "
    "'-838:59:59.000', '{{\"a\": [1, 2.5, \"x\"], \"b\": null}}', 'O''Brien \"q\" 😀 \\\\ ünï', "
    "x'00ff00', NULL)",
    "INSERT INTO {t} VALUES (2, 0.0000000001, '1000-01-01 00:00:00', '00:00:00.5', '[]', '', "
    "x'', -2147483648)",
    "INSERT INTO {t} VALUES (3, 1, NULL, NULL, NULL, 'hidden', NULL, 3)",
    "INSERT INTO {t} VALUES (4, 2, '2038-01-19 03:14:07.999999', '12:34:56.789', 'null', "
    "'shown', x'deadbeef', 4)",
)
INSERT_5 = ("INSERT INTO {t} VALUES (5, -0.5, '2024-01-02 03:04:05.000001', '-01:02:03.001', "
            "'{{\"k\": \"v\"}}', 'tab\there', x'01', 5)")
MOVES = (
    "UPDATE {t} SET id = 101, amount = 7, name = 'moved', n = 11 WHERE id = 1",
    "UPDATE {t} SET id = 102, doc = '{{\"moved\": 1}}' WHERE id = 2",
    "UPDATE {t} SET id = 202, raw = x'02' WHERE id = 102",
    "UPDATE {t} SET id = 103, name = 'shown now' WHERE id = 3",
    "UPDATE {t} SET id = 104, name = 'hidden' WHERE id = 4",
    "UPDATE {t} SET id = 105, at = NULL, dur = '838:59:59.000' WHERE id = 5",
)


def _execute(connection, database, statements, table=None):
    with connection.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        for statement in statements:
            cursor.execute(statement.format(t=table) if table else statement)
    connection.commit()


def _pipeline(mysql_source, database, tmp_path):
    path = tmp_path / "key_moves.yaml"
    warehouse = tmp_path / "warehouse.duckdb"
    path.write_text(PIPELINE.replace("DB.", f"{database}.").replace("WAREHOUSE", str(warehouse)))
    pipeline = load_pipeline(path, environ={})
    return dataclasses.replace(
        pipeline, source=mysql_source,
        target=TargetConfig(DuckDBTarget(str(warehouse), schema="main")),
        batching=BatchPolicy(max_rows=10_000, max_delay_ms=500),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")),
    ), warehouse


def _source_rows(pipeline, catalog, plan, name, ids):
    """The canonical data columns of these source rows, by id (read before they move)."""
    table = plan.table(name)
    source_table = catalog.table(pipeline.tables[0].source_database, name)
    reader = SourceReader(pipeline.source, source_table, table)
    try:
        images = reader.lookup([(i,) for i in ids])
        columns = [(c.name, c.mysql_type) for c in source_table.columns]
        forms = source_row_forms(table, table.data_columns, images, columns)
        return {image["id"]: form for image, (form, _) in zip(images, forms, strict=True)}
    finally:
        reader.close()


def _target_rows(connection, table, relation, where):
    """(canonical data columns, _OP) of the target rows matching ``where``, in binlog order
    (scd2: in version order)."""
    columns = list(table.data_columns)
    names = ", ".join(f'"{c.target_column}"' for c in columns)
    order = ('"_CHANGE_SEQ"' if table.mode == "scd2"
             else '"_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ORDER"')
    extra = ', "_IS_CURRENT"' if table.mode == "scd2" else ', "_OP"'
    rows = connection.execute(f"SELECT {names}{extra} FROM {relation} WHERE {where} "
                              f"ORDER BY {order}").fetchall()
    form = target_row_form(columns)
    return [(form(row[:-1]), row[-1]) for row in rows]


def test_key_moves_carry_the_old_row_in_every_mode(spark, mariadb, mysql_source,
                                                    fresh_database, tmp_path):
    import duckdb

    from replicator.context import Context

    pipeline, warehouse = _pipeline(mysql_source, fresh_database, tmp_path)
    root = mariadb.root_connection()
    try:
        for name in TABLES:
            _execute(root, fresh_database, [f"CREATE TABLE {name} ({COLUMNS})"])
            _execute(root, fresh_database, SEED, name)
        # the changelog's filter leaves the 'hidden' row out of the copy
        assert run(pipeline, spark).snapshot_rows == 4 * len(TABLES) - 1
        context = Context(pipeline)
        catalog, plan = context.catalog, context.plan
        for name in TABLES:
            _execute(root, fresh_database, [INSERT_5], name)
        old = {name: _source_rows(pipeline, catalog, plan, name, (1, 2, 3, 4, 5))
               for name in TABLES}
        for name in TABLES:  # one transaction per table: id 2 moves twice in it
            _execute(root, fresh_database, MOVES, name)
        new = {name: _source_rows(pipeline, catalog, plan, name, (101, 202, 103, 104, 105))
               for name in TABLES}
        result = run(pipeline, spark)
        assert result.changes == len(TABLES) * (1 + len(MOVES))
    finally:
        root.close()

    with duckdb.connect(str(warehouse), read_only=True) as connection:
        # changelog: per moved key, the delete of the old row then the insert of the new.
        changelog = plan.table("moves_changelog")
        relation = target_name(changelog, DUCKDB)
        before, after = old["moves_changelog"], new["moves_changelog"]
        assert _target_rows(connection, changelog, relation, '"ID" = 1') == [
            (before[1], "r"), (before[1], "d")]
        assert _target_rows(connection, changelog, relation, '"ID" IN (101)') == [
            (after[101], "c")]
        moved_twice = _target_rows(connection, changelog, relation, '"ID" IN (2, 102, 202)')
        assert moved_twice[0] == (before[2], "r") and moved_twice[1] == (before[2], "d")
        assert [op for _, op in moved_twice] == ["r", "d", "c", "d", "c"]
        assert moved_twice[3][0][0] == 102 and moved_twice[4] == (after[202], "c")
        assert moved_twice[3][0][1:] != after[202][1:]  # the 102 row, not the 202 one
        # id 3 never matched the filter: no delete of it; its new row matches: an insert.
        assert _target_rows(connection, changelog, relation, '"ID" IN (3, 103)') == [
            (after[103], "c")]
        # id 4 matched: its delete is logged (the old row); the new row fails: nothing.
        assert _target_rows(connection, changelog, relation, '"ID" IN (4, 104)') == [
            (before[4], "r"), (before[4], "d")]
        assert _target_rows(connection, changelog, relation, '"ID" IN (5, 105)') == [
            (before[5], "c"), (before[5], "d"), (after[105], "c")]

        # merged + log table: the target holds the new rows; the log the old rows' deletes.
        merged = plan.table("moves_merged")
        before, after = old["moves_merged"], new["moves_merged"]
        rows = connection.execute(
            f'SELECT {", ".join(chr(34) + c.target_column + chr(34) for c in merged.data_columns)}'
            f' FROM {target_name(merged, DUCKDB)} ORDER BY "ID"').fetchall()
        assert [target_row_form(list(merged.data_columns))(r) for r in rows] == [
            after[i] for i in (101, 103, 104, 105, 202)]
        log = log_name(merged, DUCKDB)
        for moved, new_id in ((1, 101), (3, 103), (4, 104), (5, 105)):
            assert _target_rows(connection, merged, log, f'"ID" IN ({moved}, {new_id})')[-2:] \
                == [(before[moved], "d"), (after[new_id], "c")], moved
        assert _target_rows(connection, merged, log, '"ID" = 2')[-1] == (before[2], "d")

        # scd2: the old key's last version keeps the old row and is closed; the new key
        # opens a current version with the new row.
        scd2 = plan.table("moves_scd2")
        relation = target_name(scd2, DUCKDB)
        before, after = old["moves_scd2"], new["moves_scd2"]
        for moved, new_id in ((1, 101), (2, 202), (3, 103), (4, 104), (5, 105)):
            versions = _target_rows(connection, scd2, relation, f'"ID" = {moved}')
            assert versions == [(before[moved], False)], moved
            assert _target_rows(connection, scd2, relation, f'"ID" = {new_id}') == [
                (after[new_id], True)], new_id
