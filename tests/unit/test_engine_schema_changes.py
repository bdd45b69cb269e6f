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
