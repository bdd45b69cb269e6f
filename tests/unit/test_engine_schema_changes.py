"""Which DDL the engine follows by itself (adding columns) and which stops the pipeline."""

from __future__ import annotations

import pytest

from replicator.engine.follow.intent import adds_columns_only


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
    from replicator.engine.follow.intent import DdlEffect, classify

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
    ("RENAME TABLE orders TO orders_old", "RENAME TABLE"),
    ("this is not sql ((", "a statement the parser cannot read"),
])
def test_ddl_that_may_change_replicated_rows_is_not(sql, what):
    from replicator.engine.follow.intent import DdlEffect, classify

    intent = classify(sql)
    assert intent.effect is DdlEffect.OTHER and intent.what == what


def test_an_added_column_beside_an_index_is_followed():
    assert adds_columns_only("ALTER TABLE orders ADD COLUMN c INT DEFAULT 7, ADD KEY k (c)")
    assert adds_columns_only("ALTER TABLE orders ADD COLUMN `partition` INT")


def test_policy_choices_are_the_json_schema_enums_and_defaults():
    import dataclasses
    import json
    from pathlib import Path

    from replicator.engine.follow.schema_changes import POLICY_CHOICES
    from replicator.model.pipeline import SchemaChangePolicy

    schema = json.loads((Path(__file__).resolve().parents[2] / "schemas"
                         / "pipeline.schema.json").read_text())
    properties = schema["definitions"]["schema_changes"]["properties"]
    assert {k: tuple(v["enum"]) for k, v in properties.items()} == POLICY_CHOICES
    defaults = {f.name: f.default for f in dataclasses.fields(SchemaChangePolicy)}
    assert {k: v["default"] for k, v in properties.items()} == defaults


def _pipeline(policy=None, table_policy=None, key="[id]"):
    import tempfile

    from replicator.config import load_pipeline

    text = ("version: 1\nname: p\nsource: {mysql: {host: h}}\ntarget: {duckdb: {path: x.duckdb}}\n"
            + (f"schema_changes: {policy}\n" if policy else "")
            + "tables:\n  - source: shop.orders\n"
            + (f"    key: {key}\n" if key else "")
            + (f"    schema_changes: {table_policy}\n" if table_policy else "")
            + "    columns:\n      id: {source_type: int}\n      qty: {source_type: int}\n"
            + "      price: {source_type: 'decimal(10,2)'}\n      note: {source_type: varchar(10)}\n")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as handle:
        handle.write(text)
    return load_pipeline(handle.name, environ={})


@pytest.mark.parametrize(("sql", "policy", "actions"), [
    ("ALTER TABLE shop.orders ADD COLUMN x INT DEFAULT 7", None, ["follow"]),
    ("ALTER TABLE shop.orders ADD COLUMN x INT", "{add_column: stop}", ["stop"]),
    ("ALTER TABLE shop.orders MODIFY qty BIGINT", None, ["follow"]),
    ("ALTER TABLE shop.orders MODIFY qty BIGINT", "{widen_type: stop}", ["stop"]),
    # not widenings: re-created and copied again (type_change: recopy), or a stop
    ("ALTER TABLE shop.orders MODIFY qty SMALLINT", None, ["recopy"]),  # narrowing
    ("ALTER TABLE shop.orders MODIFY qty SMALLINT", "{type_change: stop}", ["stop"]),
    ("ALTER TABLE shop.orders MODIFY qty VARCHAR(20)", None, ["recopy"]),
    ("ALTER TABLE shop.orders MODIFY price DECIMAL(14,2)", None, ["follow"]),
    ("ALTER TABLE shop.orders MODIFY price DECIMAL(14,4)", None, ["recopy"]),  # scale
    ("ALTER TABLE shop.orders MODIFY id BIGINT UNSIGNED", None, ["stop"]),  # a key column
    ("ALTER TABLE shop.orders MODIFY note VARCHAR(500) NOT NULL", None, ["nothing"]),
    ("ALTER TABLE shop.orders DROP COLUMN note", None, ["ignore"]),
    ("ALTER TABLE shop.orders DROP COLUMN note", "{drop_column: follow}", ["follow"]),
    # the YAML pins `note` (source_type only): a pin never stops a rename (issue 29)
    ("ALTER TABLE shop.orders RENAME COLUMN note TO remark", None, ["follow"]),
    ("ALTER TABLE shop.orders CHANGE note remark VARCHAR(20)", None, ["follow", "nothing"]),
    # the YAML declares key [id]: the MERGE never used MySQL's key
    ("ALTER TABLE shop.orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, qty)", None,
     ["nothing", "nothing"]),
    ("ALTER TABLE shop.orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, qty)",
     "{key_change: stop}", ["stop", "stop"]),
    ("TRUNCATE shop.orders", None, ["stop"]),
    ("TRUNCATE shop.orders", "{truncate: follow}", ["follow"]),
    ("TRUNCATE shop.orders", "{truncate: ignore}", ["ignore"]),
    ("DROP TABLE shop.orders", "{drop_table: ignore}", ["ignore"]),
    ("ALTER TABLE shop.orders DROP PARTITION p0", None, ["stop"]),
])
def test_one_place_decides_each_change_by_the_policy(sql, policy, actions):
    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline(policy)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    decision = decide(classify(sql), pipeline, "shop.orders", plan.tables[0])
    assert [step.action for step in decision.steps] == actions


def test_a_followed_truncate_of_one_routed_source_empties_only_its_rows():
    """`sources:` targets hold many tables' rows: a followed TRUNCATE of one of them is one
    statement per truncated table, restricted to its `_SOURCE_TABLE` (bound, never inlined);
    the policy is the routed table's own."""
    import dataclasses
    from pathlib import Path

    from replicator.config import load_pipeline
    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.model.pipeline import SchemaChangePolicy
    from replicator.plan import build_plan, offline_catalog
    from replicator.plan.dialects import DUCKDB
    from replicator.plan.program import TruncateAt, truncate_records

    sharded = load_pipeline(Path(__file__).resolve().parents[2] / "pipelines" / "sharded.yaml",
                            environ={})
    assert [s.action for s in decide(classify("TRUNCATE shop_1.orders"), sharded,
                                     "shop_1.orders", None).steps] == ["stop"]  # the default
    (spec,) = sharded.tables
    following = dataclasses.replace(sharded, tables=(dataclasses.replace(
        spec, schema_changes=SchemaChangePolicy(truncate="follow")),))
    routed = build_plan(following, offline_catalog(following)).tables[0]
    assert routed.routed and routed.mode == "merge"
    decision = decide(classify("TRUNCATE shop_1.orders"), following, "shop_1.orders", routed)
    assert [step.action for step in decision.steps] == ["follow"]
    at = [TruncateAt("mysql-bin.000001", 1, pos, 0, "", source)
          for pos, source in ((4, "shop_1.orders"), (9, "shop_2.orders"), (12, "shop_1.orders"))]
    statements = truncate_records(routed, DUCKDB, at)
    assert [s.params for s in statements] == [("shop_1.orders",), ("shop_2.orders",)]
    assert statements[0].sql == 'DELETE FROM "MAIN"."ORDERS" WHERE "_SOURCE_TABLE" = ?'
    history = dataclasses.replace(following, tables=(dataclasses.replace(
        following.tables[0], mode="scd2"),))
    scd2 = build_plan(history, offline_catalog(history)).tables[0]
    (ended,) = truncate_records(scd2, DUCKDB, at[:1])
    assert ended.sql.endswith('AND "_SOURCE_TABLE" = ?') and ended.params[-1] == "shop_1.orders"


def test_a_type_change_the_target_cannot_follow_in_place_says_both_types_and_what_happens():
    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide, stop_error
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline()
    table = build_plan(pipeline, offline_catalog(pipeline)).tables[0]
    step = decide(classify("ALTER TABLE shop.orders MODIFY qty VARCHAR(20)"), pipeline,
                  "shop.orders", table).recopying[0]
    assert step.target_column == "QTY" and step.target_type.kind == "string"
    assert step.why == ("modifies a column: QTY integer(10,0) -> string is not a widening the "
                        "target can do in place: the target column is re-created in the new "
                        "type and the table copied again")
    # The policy's stop names the other choice; a key column's stop says why it cannot.
    pipeline = _pipeline("{type_change: stop}")
    stop = decide(classify("ALTER TABLE shop.orders MODIFY qty VARCHAR(20)"), pipeline,
                  "shop.orders", table).stop
    hint = stop_error(["shop.orders"], "mysql-bin.000001:4", stop, "").hint
    assert "`schema_changes.type_change` is stop; `type_change: recopy`" in hint
    key = decide(classify("ALTER TABLE shop.orders MODIFY id BIGINT UNSIGNED"), _pipeline(),
                 "shop.orders", table).stop
    assert key is not None and "a key column's type change" in key.why


def test_a_key_change_restarts_the_stream_and_copies_a_table_whose_key_mysql_gives():
    import dataclasses

    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline()  # offline, the key is the YAML's; live, MySQL's primary key:
    table = dataclasses.replace(build_plan(pipeline, offline_catalog(pipeline)).tables[0],
                                key_origin="primary key")
    sql = "ALTER TABLE shop.orders DROP PRIMARY KEY, ADD PRIMARY KEY (id, qty)"
    decision = decide(classify(sql), pipeline, "shop.orders", table)
    assert [step.action for step in decision.steps] == ["recopy", "recopy"]
    assert "the stream restarts with the new key" in decision.steps[0].why
    changelog = decide(classify(sql), pipeline, "shop.orders",
                       dataclasses.replace(table, mode="changelog"))
    assert changelog.stop is not None
    assert "key_change: recopy re-copies merge-mode tables" in changelog.stop.why


@pytest.mark.parametrize("mode", ["changelog", "scd2"])
def test_a_type_change_stops_a_table_whose_history_a_copy_would_lose(mode):
    import dataclasses

    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline()
    table = dataclasses.replace(build_plan(pipeline, offline_catalog(pipeline)).tables[0],
                                mode=mode)
    stop = decide(classify("ALTER TABLE shop.orders MODIFY qty VARCHAR(20)"), pipeline,
                  "shop.orders", table).stop
    assert stop is not None and f"a {mode} table keeps its history" in stop.why


def test_a_table_override_wins_and_key_change_ignore_keeps_the_declared_key():
    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline("{truncate: follow}", "{truncate: ignore, key_change: ignore}", "[id]")
    plan = build_plan(pipeline, offline_catalog(pipeline))
    table = plan.tables[0]
    assert decide(classify("TRUNCATE shop.orders"), pipeline, "shop.orders",
                  table).steps[0].action == "ignore"
    assert decide(classify("ALTER TABLE shop.orders ADD PRIMARY KEY (qty)"), pipeline,
                  "shop.orders", table).steps[0].action == "ignore"


def test_a_swap_onto_the_name_is_followed_and_a_rename_away_stops():
    from replicator.engine.follow.intent import classify
    from replicator.engine.follow.schema_changes import decide

    pipeline = _pipeline()
    sql = "RENAME TABLE shop.orders TO shop._orders_old, shop._orders_new TO shop.orders"
    assert decide(classify(sql), pipeline, "shop.orders", None,
                  renamed_onto=True).steps[0].action == "follow"
    away = decide(classify("RENAME TABLE shop.orders TO shop.x"), pipeline, "shop.orders", None)
    assert away.stop is not None and "renamed away" in away.stop.why


@pytest.mark.parametrize("mode", ["merge", "changelog"])
def test_rename_table_recopy_copies_a_swapped_in_merge_table_again(mode):
    import dataclasses

    from replicator.engine.follow.intent import ChangeKind, classify
    from replicator.engine.follow.schema_changes import decide
    from replicator.plan import build_plan, offline_catalog

    pipeline = _pipeline("{rename_table: recopy}")
    table = dataclasses.replace(build_plan(pipeline, offline_catalog(pipeline)).tables[0],
                                mode=mode)
    sql = "RENAME TABLE shop.orders TO shop._orders_old, shop._orders_new TO shop.orders"
    swap = decide(classify(sql), pipeline, "shop.orders", table, renamed_onto=True)
    if mode == "merge":
        assert [s.change.kind for s in swap.recopying] == [ChangeKind.RENAME_TABLE]
        assert "copied again" in swap.recopying[0].why
    else:  # a changelog's copy would record every row again as a change
        assert swap.stop is not None and "a changelog table keeps its history" in swap.stop.why
    away = decide(classify("RENAME TABLE shop.orders TO shop.x"), pipeline, "shop.orders", table)
    assert away.stop is not None and "renamed away" in away.stop.why


def test_rows_landed_before_an_added_column_get_its_default_and_renames_their_old_value():
    import pyarrow as pa

    from replicator.engine.follow.ddl_rows import default_fills, fill_defaults
    from replicator.model import change_batch as cb
    from replicator.model.catalog import MySQLType
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import TargetType, integer

    class Table:
        columns = (
            PlannedColumn("X", integer(10, 32), source_column="x",
                          mysql_type=MySQLType.parse("int"), source_default="7"),
            PlannedColumn("S", TargetType("string"), source_column="s",
                          mysql_type=MySQLType.parse("varchar(9)"), source_default="CURRENT_USER()"),
            PlannedColumn("NEW", TargetType("string"), source_column="new",
                          mysql_type=MySQLType.parse("varchar(9)")),
        )

    old_shape = "id:int32|old:string"  # the stream decoder's fingerprint

    new_shape = str(pa.schema([("id", pa.int32()), ("x", pa.int32()), ("new", pa.string())]))
    files = [  # the batch's manifest rows: one file before the ALTERs, one after
        {"file": "mysql-bin.000002", "pos": 100, "last_file": "mysql-bin.000002",
         "last_pos": 900, "fingerprint": old_shape},
        {"file": "mysql-bin.000003", "pos": 4, "last_file": "mysql-bin.000003",
         "last_pos": 50, "fingerprint": new_shape},
    ]
    fills = default_fills(Table, files, {"new": "old"})
    assert [(f.source_column, f.value, f.from_column) for f in fills] == [
        ("x", "7", None), ("new", None, "old")]  # an expression default is not copied
    batch = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()),
        "old": ["a'1", None, None],
        "x": pa.array([None, None, 9], pa.int32()),
        "new": [None, None, "c"],
        cb.FILE_SEQ: pa.array([2, 2, 3], pa.int64()),
        cb.POS: pa.array([100, 900, 20], pa.int64()),
    })
    filled = fill_defaults(batch, fills)
    assert filled.column("x").to_pylist() == [7, 7, 9]
    assert filled.column("new").to_pylist() == ["a'1", None, "c"]
    # A batch whose files all lack the column gets it, typed as the source column.
    only_old = batch.drop_columns(["x"]).slice(0, 2)
    assert fill_defaults(only_old, fills).column("x").to_pylist() == [7, 7]


def test_only_the_changes_after_a_followed_truncate_stay():
    import pyarrow as pa

    from replicator.engine.follow.ddl_rows import after_position
    from replicator.model import change_batch as cb

    batch = pa.table({"id": [1, 2, 3, 4], cb.FILE_SEQ: pa.array([1, 2, 2, 3], pa.int64()),
                      cb.POS: pa.array([900, 100, 500, 4], pa.int64())})
    assert after_position(batch, (2, 300)).column("id").to_pylist() == [3, 4]


def test_a_cut_at_the_head_keeps_the_transaction_that_starts_there():
    """A copy queued at the source's head covers every change before it, not the first
    transaction after it, which starts at the head itself (the streaming key-change test
    lost such an update when the bound was inclusive)."""
    import pyarrow as pa

    from replicator.engine.follow.ddl_rows import after_position, last_before, row_position
    from replicator.model import change_batch as cb
    from replicator.model.changes import BinlogPosition

    head = BinlogPosition("mysql-bin.000003", 9720)
    batch = pa.table({cb.FILE_SEQ: pa.array([3, 3, 3], pa.int64()),
                      cb.POS: pa.array([4788, 9719, 9720], pa.int64())})
    kept = after_position(batch, last_before(head))
    assert kept.column(cb.POS).to_pylist() == [9720]
    assert row_position({"file": "mysql-bin.000003", "pos": 9720}) == (3, 9720)
    assert row_position({"last_file": "mysql-bin.000004", "last_pos": 4},
                        "last_file", "last_pos") == (4, 4)
