"""`replicator plan --ddl`: what the pipeline would do on a DDL, offline, before it runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAIN = "import sys; from replicator.cli.main import main; sys.argv[0] = 'replicator'; main()"


def plan(pipeline: str, ddl: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", MAIN, "plan", f"pipelines/{pipeline}.yaml", "--offline",
         "--ddl", ddl, *extra], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_an_added_column_shows_the_target_alter_with_the_default_old_rows_get():
    done = plan("shop_orders", "ALTER TABLE shop.order_lines ADD COLUMN x INT NOT NULL "
                "DEFAULT 7, ADD KEY kx (x)")
    assert done.returncode == 0, done.stderr
    assert "shop.order_lines -> MAIN.ORDER_LINES: FOLLOW: adds X" in done.stdout
    assert 'ALTER TABLE "MAIN"."ORDER_LINES" ADD COLUMN "X" INTEGER DEFAULT 7;' in done.stdout
    assert "note:" not in done.stdout


def test_a_default_the_target_cannot_take_is_named():
    done = plan("shop_orders", "ALTER TABLE shop.order_lines ADD COLUMN t DATETIME "
                "DEFAULT CURRENT_TIMESTAMP, ADD COLUMN s VARCHAR(5) DEFAULT 'it''s'")
    assert done.returncode == 0, done.stderr
    assert ('ALTER TABLE "MAIN"."ORDER_LINES" ADD COLUMN "T" TIMESTAMP;' in done.stdout)
    assert """ADD COLUMN "S" VARCHAR DEFAULT 'it''s';""" in done.stdout
    assert "rows already in the target get NULL for T: its DEFAULT is not a constant" in done.stdout


@pytest.mark.parametrize(("ddl", "dialect", "statement", "what"), [
    ("ALTER TABLE shop.order_lines MODIFY qty BIGINT", "duckdb",
     'ALTER TABLE "MAIN"."ORDER_LINES" ALTER COLUMN "QUANTITY" SET DATA TYPE BIGINT;',
     "QUANTITY integer(10,0) -> integer(19,0)"),
    ("ALTER TABLE shop.order_lines MODIFY COLUMN qty BIGINT NOT NULL", "snowflake",
     'ALTER TABLE "MAIN"."ORDER_LINES" ALTER COLUMN "QUANTITY" SET DATA TYPE NUMBER(19,0);',
     "QUANTITY integer(10,0) -> integer(19,0)"),
    # a declared key column (`key: [order_id, line_no]`) follows its column (issue 29)
    ("ALTER TABLE shop.order_lines RENAME COLUMN order_id TO oid", "duckdb",
     'ALTER TABLE "MAIN"."ORDER_LINES" RENAME COLUMN "ORDER_ID" TO "OID";',
     "FOLLOW: renames ORDER_ID to OID"),
    ("TRUNCATE shop.order_lines", "duckdb", None, "stops the pipeline (TRUNCATE TABLE)"),
])
def test_widenings_show_their_alter_and_stops_say_why(ddl, dialect, statement, what):
    done = plan("shop_orders", ddl, "--dialect", dialect)
    assert what in done.stdout, done.stdout + done.stderr
    if statement is None:
        assert done.returncode == 1 and "STOP" in done.stdout
    else:
        assert done.returncode == 0 and statement in done.stdout, done.stdout


def test_a_widening_the_target_type_absorbs_changes_nothing():
    done = plan("shop_orders", "ALTER TABLE shop.order_lines MODIFY sku VARCHAR(500) NOT NULL")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the target type stays string: no change" in done.stdout


def test_truncate_follows_only_where_the_policy_says():
    done = plan("shop_orders", "TRUNCATE shop.order_lines")
    assert done.returncode == 1
    assert "stops the pipeline (TRUNCATE TABLE)" in done.stdout
    assert "`truncate: follow` or `truncate: ignore`" in done.stdout


def test_the_log_table_is_altered_too_and_json_lists_every_statement():
    done = plan("modes", "alter table shop.orders add note varchar(20) default 'x'",
                "--format", "json", "--dialect", "snowflake")
    assert done.returncode == 0, done.stderr
    (effect,) = json.loads(done.stdout)["effects"]
    assert (effect["source"], effect["action"]) == ("shop.orders", "follow")
    assert effect["statements"] == [
        'ALTER TABLE "MAIN"."ORDERS" ADD COLUMN "NOTE" VARCHAR DEFAULT \'x\'',
        'ALTER TABLE "MAIN"."ORDERS_LOG" ADD COLUMN "NOTE" VARCHAR',
    ]


def test_ddl_that_changes_nothing_replicated_is_ignored():
    done = plan("shop_orders", "CREATE INDEX i ON order_lines (sku)")  # unqualified: resolved
    assert done.returncode == 0, done.stderr
    assert ("shop.order_lines -> MAIN.ORDER_LINES: IGNORE: CREATE INDEX: changes nothing "
            "replicated") in done.stdout
    assert "ALTER" not in done.stdout.split("\n", 1)[1]


def test_a_ddl_that_would_stop_the_pipeline_says_why_and_exits_1():
    done = plan("shop_orders", "ALTER TABLE shop.order_lines ADD COLUMN x INT, "
                "MODIFY line_no VARCHAR(500)")
    assert done.returncode == 1
    assert "STOP: schema change on shop.order_lines" in done.stdout
    assert ("stops the pipeline (modifies a column: LINE_NO integer(5,0) -> string is not a "
            "widening the target can do in place (a key column's type change needs the whole "
            "target rebuilt: --snapshot always))") in done.stdout
    assert "hint: update the pipeline YAML if needed, then re-copy the table" in done.stdout


def test_a_type_change_the_target_cannot_widen_re_creates_the_column_and_copies_the_table():
    done = plan("shop_orders", "ALTER TABLE shop.order_lines ADD COLUMN x INT, "
                "MODIFY qty VARCHAR(500)")
    assert done.returncode == 0, done.stderr
    assert ("shop.order_lines -> MAIN.ORDER_LINES: RECOPY: adds X: followed in the batch that "
            "holds the DDL") in done.stdout
    assert ("QUANTITY integer(10,0) -> string is not a widening the target can do in place: "
            "the target column is re-created in the new type and the table copied again")\
        in done.stdout
    # The statements in the order the run executes them: the re-plan's ADD first.
    assert done.stdout.split("\n", 2)[2].splitlines() == [
        'ALTER TABLE "MAIN"."ORDER_LINES" ADD COLUMN "X" INTEGER;',
        'ALTER TABLE "MAIN"."ORDER_LINES" DROP COLUMN "QUANTITY";',
        'ALTER TABLE "MAIN"."ORDER_LINES" ADD COLUMN "QUANTITY" VARCHAR;',
    ]


def test_a_swap_under_rename_table_recopy_shows_the_copy(tmp_path):
    text = (ROOT / "pipelines/shop_orders.yaml").read_text().replace(
        "../schemas/", str(ROOT / "schemas") + "/")
    yaml = tmp_path / "swap.yaml"
    yaml.write_text(text + "schema_changes: {rename_table: recopy}\n")
    swap = ("RENAME TABLE shop.order_lines TO shop._order_lines_old, "
            "shop._order_lines_new TO shop.order_lines")
    done = subprocess.run([sys.executable, "-c", MAIN, "plan", str(yaml), "--offline", "--ddl",
                           swap], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("shop.order_lines -> MAIN.ORDER_LINES: RECOPY: RENAME TABLE: the table renamed "
            "onto the replicated name is read on under it and copied again") in done.stdout
    assert "target rows it lacks are removed at the copy's end" in done.stdout
    assert "shop._order_lines_new: NOT_REPLICATED" in done.stdout
    followed = plan("shop_orders", swap)  # the default, follow: no copy
    assert "ORDER_LINES: FOLLOW: a table renamed onto the replicated name" in followed.stdout


def test_tables_the_pipeline_does_not_replicate_are_ignored():
    done = plan("shop_orders", "ALTER TABLE other.t DROP COLUMN a")
    assert done.returncode == 0, done.stderr
    assert "other.t: NOT_REPLICATED" in done.stdout


def test_a_rename_into_a_selection_is_copied_by_the_running_pipeline():
    done = plan("sharded", "RENAME TABLE tmp.o TO shop_9.orders")
    assert done.returncode == 0, done.stderr
    assert "shop_9.orders -> MAIN.ORDERS: FOLLOW: renamed into the `sources:` selection" in done.stdout
    assert "tmp.o: NOT_REPLICATED" in done.stdout


@pytest.mark.parametrize(("ddl", "message"), [
    ("SELECT 1", "error: not a DDL statement"),
    ("ALTER TABLE nope ADD COLUMN a INT", "names table 'nope' without its database"),
])
def test_bad_ddl_gets_a_clear_error_and_no_traceback(ddl, message):
    done = plan("shop_orders", ddl)
    assert done.returncode == 2 and message in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr


def test_on_snowflake_a_type_change_shows_the_staging_table_re_created_in_the_new_types():
    """Snowflake's staging table outlives a batch: the re-plan's setup re-creates it with the
    added column and the new types, after the ADD and the widening, before the column is
    re-created: the statements in the order the run executes them."""
    done = plan("shop_orders", "ALTER TABLE shop.order_lines ADD COLUMN x INT, "
                "MODIFY qty VARCHAR(500), MODIFY unit_price DECIMAL(14,2)", "--dialect", "snowflake",
                "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    (effect,) = json.loads(done.stdout)["effects"]
    statements = effect["statements"]
    table = 'ALTER TABLE "MAIN"."ORDER_LINES" '
    expected = [table + 'ADD COLUMN "X" NUMBER(10,0)',
                table + 'ALTER COLUMN "UNIT_PRICE" SET DATA TYPE NUMBER(14,2)',
                'CREATE OR REPLACE TRANSIENT TABLE "MAIN"."_REPLICATOR_STAGE_ORDER_LINES"',
                table + 'DROP COLUMN "QUANTITY"', table + 'ADD COLUMN "QUANTITY" VARCHAR']
    assert len(statements) == len(expected), statements
    assert all(s.startswith(e) for s, e in zip(statements, expected, strict=True)), statements
    staging = statements[2]
    assert '"QUANTITY" VARCHAR' in staging and '"X" NUMBER(10,0)' in staging
    assert '"UNIT_PRICE" NUMBER(14,2)' in staging
