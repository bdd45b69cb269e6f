"""Which statements are DDL, of what kind, naming which tables (replicator.source.ddl)."""

from __future__ import annotations

import pytest

from replicator.model.changes import BinlogPosition
from replicator.source.ddl import schema_change

AT = BinlogPosition("mysql-bin.000001", 4)


def read(sql: str) -> tuple[str, tuple[str, ...]] | None:
    change = schema_change(sql, "d", AT, 0)
    return None if change is None else (change.kind, change.tables)


@pytest.mark.parametrize(("sql", "expected"), [
    ("CREATE TABLE `a``b` (x int)", ("create", ("d.a`b",))),
    ("/* x */ DROP TABLE IF EXISTS `s`.`t1`, t2 /* generated */", ("drop", ("s.t1", "d.t2"))),
    ("CREATE INDEX i ON t (x)", ("alter", ("d.t",))),
    ("create unique index i using btree on db.t (x)", ("alter", ("db.t",))),
    ("DROP INDEX i ON `s`.`t`", ("alter", ("s.t",))),
    ("CREATE DATABASE x", ("create", ())),
    ("DROP SCHEMA IF EXISTS x", ("drop", ())),
    ("ALTER ONLINE IGNORE TABLE db.t ADD x INT", ("alter", ("db.t",))),
    ("alter table t rename to u", ("alter", ("d.t",))),
    ("create or replace temporary table if not exists x.y like z", ("create", ("x.y",))),
    ("CREATE TABLE IF NOT EXISTS t2 SELECT 1", ("create", ("d.t2",))),
    ("TRUNCATE t", ("truncate", ("d.t",))),
    ("truncate table `x`.`y`", ("truncate", ("x.y",))),
    # Names the regular expressions split or missed: keywords, commas and TO inside quotes.
    ("CREATE TABLE status (x int)", ("create", ("d.status",))),
    ("DROP TABLE date, comment", ("drop", ("d.date", "d.comment"))),
    ("DROP TABLE `a, b`, c", ("drop", ("d.a, b", "d.c"))),
    ("RENAME TABLE `a to b` TO c, d2.e TO `f``g`", ("rename", ("d.a to b", "d.c", "d2.e", "d.f`g"))),
    ("RENAME TABLE t TO _t_del, _t_gho TO t", ("rename", ("d.t", "d._t_del", "d._t_gho", "d.t"))),
    ("-- a comment\n# another\n  ALTER TABLE `table` ADD `if` INT", ("alter", ("d.table",))),
    # DDL of objects that hold no rows.
    ("CREATE DEFINER=`root`@`%` VIEW v AS SELECT 1", ("other", ())),
    ("CREATE OR REPLACE VIEW v AS SELECT 1", ("other", ())),
    ("DROP TRIGGER IF EXISTS tr", ("other", ())),
    ("CREATE USER u", ("other", ())),
])
def test_ddl_kind_and_tables(sql, expected):
    assert read(sql) == expected


@pytest.mark.parametrize("sql", [
    "BEGIN", "COMMIT", "GRANT SELECT ON *.* TO x", "/* only */ INSERT INTO t VALUES (1)",
    "SET @a = 'ALTER TABLE t'", "", "   ", "XA START 'x'",
])
def test_other_statements_are_not_ddl(sql):
    assert read(sql) is None
