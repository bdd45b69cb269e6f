"""Stale YAML reported with its edit, and ``replicator init --refresh`` (issue 29, point 4), on
the real MariaDB.

A pipeline scaffolded by ``replicator init`` (every column pinned) and edited by hand (comments,
a mask, a target name, block and flow style, single quotes); then MySQL renames, drops, retypes
and adds columns. ``check`` and ``status`` name each stale entry at its line with its edit;
``init --refresh`` rewrites exactly those entries, a second refresh changes nothing, ``validate``
passes and ``plan --offline`` plans what the live ``plan`` does.

The first test lets a real run follow the DDL (DuckDB target, the session's local Spark), so
the followed renames and drops are the run's own ``followed_columns.json``, and runs again on
the refreshed file; the second writes that record by hand, as a run would, to cover the rest
(another indentation, ``key:`` and ``track_history:``, an entry whose fix nobody knows).
"""

from __future__ import annotations

import fcntl
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from typer.testing import CliRunner

from replicator.cli.main import app
from replicator.config import load_pipeline, validate_file
from replicator.context import FOLLOWED_COLUMNS_FILE
from replicator.errors import UsageError

pytestmark = pytest.mark.mysql


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args))


def plan_projection(path: Path, *, offline: bool) -> list[dict[str, Any]]:
    """What a plan decides per table, as ``plan --format json`` prints it, without what only
    the live catalog can know (NULL-ability, where a column's type came from)."""
    args = ["plan", str(path), "--format", "json"] + (["--offline"] if offline else [])
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout[result.stdout.index("{"):])
    return [{
        "source": table["source"], "target": table["target"], "key": table["key"],
        "excluded": table["excluded"],
        "columns": [(c["source_column"], c["target_column"], c["mysql_type"], c["target_type"],
                     c["role"], c["mask"]) for c in table["columns"]],
    } for table in document["tables"]]


def stale_of(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``check --format json``'s stale entries by (setting, kind); check passes with them."""
    result = invoke("check", str(path), "--skip-target", "--format", "json")
    document = json.loads(result.stdout)
    failed = [c for c in document["checks"] if c["status"] == "fail"]
    assert result.exit_code == (1 if failed else 0), result.output
    return {(e["setting"], e["kind"]): e for e in document["stale"]}


def line_of(text: str, number: int) -> str:
    return text.splitlines()[number - 1]


def scaffold(mariadb: Any, mysql_source: Any, db: str, tmp_path: Path, monkeypatch: Any,
             *tables: str) -> str:
    monkeypatch.setenv("MYSQL_PASSWORD", mysql_source.password)
    url = f"mysql://{mysql_source.user}@127.0.0.1:{mysql_source.port}/{db}"
    result = invoke("init", "--from", url, "--tables", ",".join(tables))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.spark
@pytest.mark.slow
def test_refresh_after_a_run_followed_the_ddl(spark, mariadb, mysql_source, fresh_database,
                                              tmp_path, monkeypatch):
    from tests.integration.e2e_support import assert_target_equals_source, run

    db = fresh_database
    root = mariadb.root_connection(db)
    with root.cursor() as cursor:
        cursor.execute("CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, qty INT NOT NULL, "
                       "price DECIMAL(12,2), email VARCHAR(40), note VARCHAR(40), "
                       "sku VARCHAR(20))")
        cursor.execute("INSERT INTO orders VALUES (1, 2, 9.50, 'a@example.com', 'first', 'S-1'), "
                       "(2, 5, 1.25, 'b@example.com', 'second', 'S-2')")
    text = scaffold(mariadb, mysql_source, db, tmp_path, monkeypatch, "orders")
    # By hand: a comment line, an end-of-line comment, a mask, a target name in block style,
    # single quotes, the target and where the checkpoint goes.
    edits = {
        '      qty: {source_type: "int(11)"}\n':
            '      qty: {source_type: "int(11)"}   # how many\n',
        '      price: {source_type: "decimal(12,2)"}\n':
            '      # the price, in cents\n      price: {source_type: "decimal(12,2)"}\n',
        '      email: {source_type: "varchar(40)"}\n':
            '      email: {source_type: "varchar(40)", mask: sha256}\n',
        '      note: {source_type: "varchar(40)"}\n':
            "      note:   # shown as remark\n        source_type: 'varchar(40)'\n"
            "        name: remark\n",
        '      sku: {source_type: "varchar(20)"}\n': "      sku: {source_type: 'varchar(20)'}\n",
        "  duckdb: {path: ./warehouse.duckdb}\n":
            f"  duckdb: {{path: {tmp_path / 'warehouse.duckdb'}}}\n"
            f"engine: {{checkpoint: {tmp_path / 'checkpoint'}}}\n"
            "batching: {max_rows: 5000, max_delay: 500ms}\n",
    }
    for old, new in edits.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "shop.yaml"
    path.write_text(text)
    run(load_pipeline(path), spark)

    with root.cursor() as cursor:  # while no run follows
        cursor.execute("ALTER TABLE orders RENAME COLUMN qty TO quantity")
        cursor.execute("ALTER TABLE orders DROP COLUMN price")
        cursor.execute("ALTER TABLE orders MODIFY sku VARCHAR(80)")
        cursor.execute("ALTER TABLE orders ADD COLUMN shipped TINYINT(1) NOT NULL DEFAULT 0 "
                       "AFTER quantity")
        cursor.execute("ALTER TABLE orders RENAME COLUMN note TO remark_text")
        cursor.execute("ALTER TABLE orders RENAME COLUMN email TO email_address")
        cursor.execute("INSERT INTO orders VALUES (3, 7, 1, 'c@example.com', 'third', "
                       "'S-3-LONGER-THAN-TWENTY')")
    run(load_pipeline(path), spark)  # follows the DDL: the record is the run's own
    followed = json.loads((tmp_path / "checkpoint" / FOLLOWED_COLUMNS_FILE).read_text())
    assert followed == {f"{db}.orders": {"qty": "quantity", "price": None,
                                         "note": "remark_text", "email": "email_address"}}

    # check and status: each stale entry at its line, with its edit; check still passes.
    stale = stale_of(path)
    source = f"{db}.orders"
    assert set(stale) == {("columns.qty", "renamed"), ("columns.price", "dropped"),
                          ("columns.email", "renamed"), ("columns.note", "renamed"),
                          ("columns.sku", "retyped"), ("columns.shipped", "added")}
    qty = stale["columns.qty", "renamed"]
    assert qty["text"] == (f"{path}:{qty['line']}: {source} columns.qty: renamed to quantity in "
                           f"MySQL: rename the entry to quantity (or run: replicator init "
                           f"--refresh {path})")
    assert line_of(text, qty["line"]).startswith("      qty:")
    assert line_of(text, stale["columns.note", "renamed"]["line"]).startswith("      note:")
    assert line_of(text, stale["columns.price", "dropped"]["line"]).startswith("      price:")
    assert stale["columns.sku", "retyped"]["edit"] == 'write source_type: "varchar(80)"'
    assert stale["columns.shipped", "added"]["edit"] == (
        'add `shipped: {source_type: "tinyint(1)"}` after quantity')
    assert not any(e["blocking"] for e in stale.values())
    status = invoke("status", str(path), "--format", "json")
    assert {e["text"] for e in json.loads(status.stdout)["stale_entries"]} == {
        e["text"] for e in stale.values()}
    shown = invoke("status", str(path)).stdout
    assert f"stale:       {qty['text']}" in shown

    check_only = invoke("init", "--refresh", str(path), "--check")
    assert check_only.exit_code == 1 and path.read_text() == text
    assert "+      quantity: " in check_only.stdout

    refreshed = invoke("init", "--refresh", str(path))
    assert refreshed.exit_code == 0, refreshed.output
    assert "6 entries changed" in refreshed.stdout
    # Exactly the stale entries rewritten; every other byte as it was (comments, quotes,
    # style, order; the comment below the quantity line stays below its new neighbour).
    expected = text
    for old, new in {
        '      qty: {source_type: "int(11)"}   # how many\n':
            '      quantity: {source_type: "int(11)"}   # how many\n'
            '      shipped: {source_type: "tinyint(1)"}\n',
        '      price: {source_type: "decimal(12,2)"}\n': "",
        '      email: {source_type: "varchar(40)", mask: sha256}\n':
            '      email_address: {source_type: "varchar(40)", mask: sha256}\n',
        "      note:   # shown as remark\n": "      remark_text:   # shown as remark\n",
        "      sku: {source_type: 'varchar(20)'}\n": "      sku: {source_type: 'varchar(80)'}\n",
    }.items():
        expected = expected.replace(old, new)
    assert path.read_text() == expected
    # The file names the columns as MySQL does now: the run's records of them are done with.
    assert json.loads((tmp_path / "checkpoint" / FOLLOWED_COLUMNS_FILE).read_text()) == {}

    again = invoke("init", "--refresh", str(path))
    assert again.exit_code == 0 and "up to date" in again.stdout
    assert path.read_text() == expected
    assert stale_of(path) == {}
    assert [d for d in validate_file(path) if d.is_error] == []
    assert plan_projection(path, offline=True) == plan_projection(path, offline=False)

    # The refreshed file runs: the mask still masks the renamed column, the target equals the
    # source row by row.
    with root.cursor() as cursor:
        cursor.execute("INSERT INTO orders VALUES (4, 1, 1, 'd@example.com', 'fourth', 'S-4')")
    pipeline = load_pipeline(path)
    run(pipeline, spark)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
        emails = [row[0] for row in target.execute("SELECT EMAIL_ADDRESS FROM ORDERS")
                  .fetchall()]
        assert len(emails) == 4 and not any("@" in (email or "") for email in emails)
    root.close()


INDENTED_BY_FOUR = """\
version: 1
# indented by four, dashes at the margin
source:
    mysql: {{host: 127.0.0.1, port: {port}, user: {user}, password: "${{MYSQL_PASSWORD}}"}}
target:
    duckdb: {{path: {tmp}/warehouse.duckdb}}
engine:
    checkpoint: {tmp}/checkpoint
tables:
-   source: {db}.accounts
    mode: scd2
    primary_key: [id]   # pinned for plan --offline
    track_history:
    -   status   # opens a version
    -   score
    columns:
        id: {{source_type: int(11)}}
        login: {{source_type: "varchar(20)"}}

        status: {{source_type: "varchar(10)"}}
        score: {{source_type: "int(11)"}}   # gone soon
        # masked
        secret: {{source_type: "varchar(30)", mask: redact}}
-   source: {db}.events   # only one column configured: no pins are added here
    key: [id]
    columns:
        payload: {{exclude: true}}
"""


def test_refresh_keys_track_history_and_what_it_leaves_to_a_human(
        mariadb, mysql_source, fresh_database, tmp_path, monkeypatch):
    db = fresh_database
    monkeypatch.setenv("MYSQL_PASSWORD", mysql_source.password)
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE accounts (id INT PRIMARY KEY, login VARCHAR(20), "
                       "status VARCHAR(10), score INT, secret VARCHAR(30))")
        cursor.execute("CREATE TABLE events (id INT PRIMARY KEY, kind VARCHAR(10), payload TEXT)")
    path = tmp_path / "accounts.yaml"
    text = INDENTED_BY_FOUR.format(port=mysql_source.port, user=mysql_source.user, tmp=tmp_path,
                                   db=db)
    path.write_text(text)
    assert stale_of(path) == {}

    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("ALTER TABLE accounts RENAME COLUMN id TO account_id, "
                       "RENAME COLUMN status TO state, DROP COLUMN score, "
                       "RENAME COLUMN secret TO secret_text")
        cursor.execute("ALTER TABLE events ADD COLUMN extra INT, RENAME COLUMN id TO event_id")
    # The run followed the renames of id and status and the drop of score, and then lost its
    # checkpoint before it followed the rename of secret (so nobody knows where it went).
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / FOLLOWED_COLUMNS_FILE).write_text(json.dumps(
        {f"{db}.accounts": {"id": "account_id", "status": "state", "score": None},
         f"{db}.events": {"id": "event_id"}}))

    stale = stale_of(path)  # fails: the masked column is gone and the run stops on it
    assert set(stale) == {
        ("columns.id", "renamed"), ("columns.status", "renamed"), ("columns.score", "dropped"),
        ("columns.secret", "missing"), ("primary_key", "changed"),
        ("track_history[0]", "renamed"), ("track_history[1]", "dropped"),
        ("columns.secret_text", "added"), ("key[0]", "renamed")}
    secret = stale["columns.secret", "missing"]
    assert secret["blocking"] and not secret["refreshable"]
    assert "R302" in secret["problem"] and line_of(text, secret["line"]).lstrip().startswith(
        "secret:")
    assert not stale["columns.secret_text", "added"]["refreshable"]  # maybe where secret went
    assert stale["primary_key", "changed"]["edit"] == "write primary_key: [account_id]"
    assert stale["key[0]", "renamed"]["edit"] == "write event_id instead of id in key"
    assert stale["key[0]", "renamed"]["source_table"] == f"{db}.events"
    assert line_of(text, stale["track_history[1]", "dropped"]["line"]).strip() == "-   score"

    # While a run holds the pipeline (it records renames against the YAML it started with),
    # the file and the record are left alone; --check still shows what would change.
    with (tmp_path / "checkpoint" / "run.lock").open("w") as lock:
        lock.write("4242")
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
        refused = invoke("init", "--refresh", str(path))
        assert isinstance(refused.exception, UsageError) and "PID 4242" in str(refused.exception)
        assert path.read_text() == text
        assert invoke("init", "--refresh", str(path), "--check").exit_code == 1
    refreshed = invoke("init", "--refresh", str(path))
    assert refreshed.exit_code == 1  # written, but the masked entry is left for a human
    assert "left for you to edit" in refreshed.stdout and "columns.secret:" in refreshed.stdout
    expected = text
    for old, new in {
        "    primary_key: [id]   # pinned for plan --offline\n":
            "    primary_key: [account_id]   # pinned for plan --offline\n",
        "    key: [id]\n": "    key: [event_id]\n",
        "    -   status   # opens a version\n    -   score\n":
            "    -   state   # opens a version\n",
        "        id: {source_type: int(11)}\n": "        account_id: {source_type: int(11)}\n",
        '        status: {source_type: "varchar(10)"}\n':
            '        state: {source_type: "varchar(10)"}\n',
        '        score: {source_type: "int(11)"}   # gone soon\n': "",
    }.items():
        assert old in expected, old
        expected = expected.replace(old, new)
    assert path.read_text() == expected
    # Forgotten: the records of names the file now writes as MySQL does.
    assert json.loads((tmp_path / "checkpoint" / FOLLOWED_COLUMNS_FILE).read_text()) == {}
    again = invoke("init", "--refresh", str(path), "--format", "json")
    assert again.exit_code == 1 and path.read_text() == expected
    document = json.loads(again.stdout)
    assert not document["changed"] and {e["setting"] for e in document["left"]} == {
        "columns.secret", "columns.secret_text"}

    # The human's edit: the masked entry is the renamed column. Then nothing is stale.
    path.write_text(expected.replace("        secret: {", "        secret_text: {"))
    assert stale_of(path) == {}
    final = invoke("init", "--refresh", str(path), "--check")
    assert final.exit_code == 0, final.output
    assert [d for d in validate_file(path) if d.is_error] == []
    # `plan --offline` plans a table from its pins: the one pinned table on its own.
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(path.read_text().split(f"-   source: {db}.events")[0])
    assert plan_projection(pinned, offline=True) == plan_projection(pinned, offline=False)
