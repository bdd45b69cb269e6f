"""``replicator init`` against the real server: the output passes validate unchanged."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from replicator.cli.init import parse_mysql_url
from replicator.cli.main import app
from replicator.config import validate_file
from replicator.errors import UsageError

pytestmark = pytest.mark.mysql


def test_init_output_validates_unchanged(mariadb, mysql_source, fresh_database, tmp_path,
                                          monkeypatch):
    db = fresh_database
    with mariadb.root_connection(db) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE orders (id BIGINT UNSIGNED PRIMARY KEY, amount DECIMAL(12,2),"
                       " `first name` VARCHAR(20), `order` INT, status ENUM('new','it''s'),"
                       " doc JSON, at DATETIME(6))")
        cursor.execute("CREATE TABLE order_lines (o INT, n INT, PRIMARY KEY (n, o))")
        cursor.execute("CREATE TABLE nokey (x INT)")
    monkeypatch.setenv("MYSQL_PASSWORD", mysql_source.password)
    url = f"mysql://{mysql_source.user}@127.0.0.1:{mysql_source.port}/{db}"
    result = CliRunner().invoke(app, ["init", "--from", url])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith("# yaml-language-server: $schema=")
    assert "password: ${MYSQL_PASSWORD}" in text and mysql_source.password not in text
    # "n" is a YAML 1.1 boolean: quoted. The key is pinned (`primary_key:`), not declared
    # (`key:`), so that a key change in MySQL is followed by its policy (issue 29).
    assert 'primary_key: ["n", o]' in text and "primary_key: [id]" in text
    assert "\n    key:" not in text
    assert "NO PRIMARY KEY" in text
    assert '"first name": {source_type: "varchar(20)"}' in text
    assert "status: {source_type: \"enum('new','it''s')\"}" in text
    assert 'doc: {source_type: "json"}' in text
    pipelines = tmp_path / "pipelines"
    pipelines.mkdir()
    path = pipelines / "scaffold.yaml"
    path.write_text(text)
    diagnostics = validate_file(path, environ={"MYSQL_PASSWORD": "x"})
    assert [d for d in diagnostics if d.is_error] == []

    only = CliRunner().invoke(app, ["init", "--from", url, "--tables", "order_lines",
                                    "--target", "snowflake"])
    assert only.exit_code == 0 and "orders" not in only.stdout and "snowflake:" in only.stdout
    missing = CliRunner().invoke(app, ["init", "--from", url, "--tables", "nope"])
    assert isinstance(missing.exception, UsageError)  # main() turns it into exit 2


def test_parse_mysql_url():
    source, db = parse_mysql_url("mysql://u:p%40ss@h:3307/shop", environ={})
    assert (source.user, source.password, source.host, source.port, db) == (
        "u", "p@ss", "h", 3307, "shop")
    source, _ = parse_mysql_url("mysql://h/shop", environ={"MYSQL_PASSWORD": "pw"})
    assert (source.user, source.password, source.port) == ("replicator", "pw", 3306)
