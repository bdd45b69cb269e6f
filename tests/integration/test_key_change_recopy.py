"""A primary key changed in MySQL: the run stops (`key_change: stop`, the default), and the
remedy it names, `run --snapshot always`, re-copies the table into a target rebuilt under the
new key (DuckDB enforces the old one: every row sharing an old key value failed the copy)."""

from __future__ import annotations

import pytest

from replicator.config import load_pipeline
from replicator.errors import ReplicatorError
from tests.integration.e2e_support import assert_target_equals_source, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

PIPELINE = """\
version: 1
name: rekey
source:
  mysql: {{host: {host}, port: {port}, user: {user}, password: "{password}"}}
target:
  duckdb: {{path: "{warehouse}"}}
batching: {{max_rows: 500, max_delay: 200ms}}
engine:
  master: local[1]
  checkpoint: {checkpoint}
tables:
  - source: {database}.items
"""


def test_a_key_change_stops_and_the_named_remedy_re_copies_under_the_new_key(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    import duckdb

    root = mariadb.root_connection(fresh_database)
    with root.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id INT NOT NULL, grp INT NOT NULL, "
                       "note VARCHAR(40), PRIMARY KEY (id)) CHARACTER SET utf8mb4")
        cursor.executemany("INSERT INTO items VALUES (%s, %s, %s)",
                           [(n, 1, f"it's {n} 🚀") for n in range(1, 31)])
    path = tmp_path / "rekey.yaml"
    warehouse = tmp_path / "warehouse.duckdb"
    path.write_text(PIPELINE.format(
        host=mysql_source.host, port=mysql_source.port, user=mysql_source.user,
        password=mysql_source.password or "", warehouse=warehouse,
        checkpoint=tmp_path / "checkpoint", database=fresh_database))
    pipeline = load_pipeline(path, environ={})
    run(pipeline, spark)

    with root.cursor() as cursor:
        cursor.execute("ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (id, grp)")
        cursor.executemany("INSERT INTO items VALUES (%s, 2, %s)",
                           [(n, f"second {n}") for n in range(1, 11)])  # ids shared now
        cursor.execute("DELETE FROM items WHERE id = 30")
    with pytest.raises(ReplicatorError) as stopped:
        run(pipeline, spark)
    assert "key_change" in stopped.value.message + (stopped.value.hint or "")
    assert "--snapshot always" in (stopped.value.hint or "")

    run(pipeline, spark, snapshot="always")
    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
        key = target.execute("SELECT constraint_column_names FROM duckdb_constraints() WHERE "
                             "table_name = 'ITEMS' AND constraint_type = 'PRIMARY KEY'"
                             ).fetchall()
        assert key == [(["ID", "GRP"],)]
        assert target.execute('SELECT COUNT(*) FROM main."ITEMS"').fetchone()[0] == 39
    root.close()
