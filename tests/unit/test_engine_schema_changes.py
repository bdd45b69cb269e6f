"""Which DDL the engine follows by itself (adding columns) and which stops the pipeline."""

from __future__ import annotations

import pytest

from replicator.engine.schema_changes import adds_columns_only


@pytest.mark.parametrize("sql", [
    "ALTER TABLE shop.orders ADD COLUMN note VARCHAR(50)",
    "alter table `shop`.`orders` add note varchar(50) default 'a,b' after id",
    "ALTER TABLE orders ADD COLUMN a INT, ADD COLUMN b DECIMAL(10,2) NULL, ALGORITHM=INSTANT",
    "/* tool */ ALTER ONLINE TABLE orders ADD COLUMN IF NOT EXISTS c JSON",
    "ALTER TABLE orders ADD COLUMN `index` INT",
])
def test_added_columns_are_followed(sql):
    assert adds_columns_only(sql)


@pytest.mark.parametrize("sql", [
    "ALTER TABLE orders DROP COLUMN note",
    "ALTER TABLE orders ADD COLUMN a INT, DROP COLUMN b",
    "ALTER TABLE orders ADD INDEX idx_a (a)",
    "ALTER TABLE orders ADD PRIMARY KEY (id)",
    "ALTER TABLE orders MODIFY COLUMN total DECIMAL(20,2)",
    "ALTER TABLE orders RENAME COLUMN a TO b",
    "ALTER TABLE orders CHANGE a b INT",
    "TRUNCATE TABLE orders",
    "DROP TABLE orders",
    "RENAME TABLE orders TO orders_old",
    "ALTER TABLE orders ADD CONSTRAINT c CHECK (a > 0)",
])
def test_other_ddl_is_not(sql):
    assert not adds_columns_only(sql)


@pytest.mark.parametrize(("sql", "what"), [
    ("ALTER TABLE orders ADD INDEX idx_a (a)", "adds an index or constraint"),
    ("ALTER TABLE orders ADD UNIQUE KEY u (a, b)", "adds an index or constraint"),
    ("ALTER TABLE orders ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (id)",
     "adds an index or constraint"),
    ("ALTER TABLE orders ADD CONSTRAINT c CHECK (a > 0)", "adds an index or constraint"),
    ("ALTER TABLE orders DROP INDEX idx_a", "drops an index"),
    ("ALTER TABLE orders DROP FOREIGN KEY fk", "drops a foreign key"),
    ("ALTER TABLE orders RENAME INDEX a TO b", "renames an index"),
    ("CREATE INDEX i ON shop.orders (a)", "CREATE INDEX"),
    ("DROP INDEX i ON orders", "DROP INDEX"),
    ("ALTER TABLE orders ALTER COLUMN a SET DEFAULT 3", "changes a column default"),
    ("ALTER TABLE orders ALTER COLUMN a DROP DEFAULT", "changes a column default"),
    ("ALTER TABLE orders FORCE", "rebuilds the table (FORCE)"),
    ("ALTER TABLE orders ENGINE=InnoDB", "table options"),
    ("ALTER TABLE orders COMMENT = 'x, y'", "table options"),
    ("ALTER TABLE orders ROW_FORMAT=COMPRESSED", "table options"),
    ("ALTER TABLE orders AUTO_INCREMENT = 100", "table options"),
    ("ALTER TABLE orders ALGORITHM=INPLACE, LOCK=NONE, ADD INDEX (a)",
     "adds an index or constraint"),
    ("/* pt-osc */ ALTER ONLINE TABLE `shop`.`orders` ADD INDEX (a)",
     "adds an index or constraint"),
    ("ALTER TABLE orders PARTITION BY HASH (id) PARTITIONS 4", "changes partitioning (rows kept)"),
    ("ALTER TABLE shop.orders REMOVE PARTITIONING", "changes partitioning (rows kept)"),
    ("ALTER TABLE orders ADD PARTITION (PARTITION p3 VALUES LESS THAN (100))",
     "changes partitioning (rows kept)"),
    ("OPTIMIZE TABLE orders", "OPTIMIZE TABLE (maintenance)"),
    ("ANALYZE TABLE orders", "ANALYZE TABLE (maintenance)"),
])
def test_ddl_that_changes_nothing_replicated_is_ignored(sql, what):
    from replicator.engine.schema_changes import DdlEffect, classify

    intent = classify(sql)
    assert intent.effect is DdlEffect.NOTHING
    assert intent.what == what


@pytest.mark.parametrize(("sql", "what"), [
    ("ALTER TABLE orders ADD PRIMARY KEY (id)", "changes the primary key"),
    ("ALTER TABLE orders ADD CONSTRAINT pk PRIMARY KEY (id)", "changes the primary key"),
    ("ALTER TABLE orders DROP PRIMARY KEY", "drops the primary key"),
    ("ALTER TABLE orders DROP PARTITION p0", "DROP PARTITION changes rows without row events"),
    ("ALTER TABLE orders TRUNCATE PARTITION p0",
     "TRUNCATE PARTITION changes rows without row events"),
    ("ALTER TABLE orders EXCHANGE PARTITION p0 WITH TABLE other",
     "EXCHANGE PARTITION changes rows without row events"),
    ("ALTER TABLE orders ADD COLUMN x INT, PARTITION BY HASH (id)",
     "a partition operation beside other changes"),
    ("ALTER TABLE orders MODIFY note VARCHAR(500)", "modifies a column"),
    ("ALTER TABLE orders RENAME COLUMN a TO b", "renames a column"),
    ("ALTER TABLE orders ADD INDEX (a), DROP COLUMN b", "drops a column"),
    ("ALTER TABLE orders CONVERT TO CHARACTER SET utf8mb4", "ALTER TABLE"),
    ("TRUNCATE TABLE orders", "TRUNCATE TABLE"),
    ("RENAME TABLE orders TO orders_old", "RENAME"),
    ("this is not sql ((", "a statement the parser cannot read"),
])
def test_ddl_that_may_change_replicated_rows_is_not(sql, what):
    from replicator.engine.schema_changes import DdlEffect, classify

    intent = classify(sql)
    assert intent.effect is DdlEffect.OTHER and intent.what == what


def test_an_added_column_beside_an_index_is_followed():
    assert adds_columns_only("ALTER TABLE orders ADD COLUMN c INT DEFAULT 7, ADD KEY k (c)")
    assert adds_columns_only("ALTER TABLE orders ADD COLUMN `partition` INT")
