-- shop.order_lines -> MAIN.ORDER_LINES (duckdb)

-- transforms, evaluated by DuckDB over each change batch before staging (Spark SQL translated):
--   filter: status <> 'test'
--     -> (CAST("status" AS VARCHAR) <> 'test')
--   EMAIL_HASH: mask sha256 of the value's text

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `order_id`, `line_no`, `sku`, `qty`, CAST(`unit_price` AS CHAR) AS `unit_price`, `status`, `customer_email`, `password_hash`, CAST(`created_at` AS CHAR) AS `created_at` FROM `shop`.`order_lines`
--   (no filter is pushed down: no part of it is provably exact in MySQL, or a table reading the same source needs every row)

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDER_LINES" (
  "ORDER_ID" DECIMAL(20,0) NOT NULL,
  "LINE_NO" INTEGER NOT NULL,
  "PRODUCT_SKU" VARCHAR,
  "QUANTITY" INTEGER,
  "UNIT_PRICE" DECIMAL(12,2),
  "STATUS" VARCHAR,
  "EMAIL_HASH" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_DELETED" BOOLEAN,
  "_DELETED_AT" TIMESTAMPTZ,
  PRIMARY KEY ("ORDER_ID", "LINE_NO")
);

-- create state table
CREATE TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STATE" (
  "PIPELINE" VARCHAR NOT NULL,
  "TABLE" VARCHAR NOT NULL,
  "BATCH_ID" BIGINT NOT NULL,
  "END_OFFSET" VARCHAR,
  "APPLIED_AT" TIMESTAMPTZ NOT NULL,
  PRIMARY KEY ("PIPELINE", "TABLE", "BATCH_ID")
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."ORDER_LINES" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDER_LINES" (
  "ORDER_ID" DECIMAL(20,0),
  "LINE_NO" INTEGER,
  "PRODUCT_SKU" VARCHAR,
  "QUANTITY" INTEGER,
  "UNIT_PRICE" DECIMAL(12,2),
  "STATUS" VARCHAR,
  "EMAIL_HASH" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_ORDER_LINES";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_ORDER_LINES" BY NAME
SELECT * FROM read_parquet(?);

-- merge staged changes
MERGE INTO "MAIN"."ORDER_LINES" AS "tgt"
USING (
  SELECT
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDER_LINES"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID", "LINE_NO" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ORDER_ID" = "src"."ORDER_ID" AND "tgt"."LINE_NO" = "src"."LINE_NO"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_DELETED" = TRUE,
    "_DELETED_AT" = "src"."_REPLICATOR_TS",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN MATCHED THEN UPDATE SET
    "PRODUCT_SKU" = "src"."PRODUCT_SKU",
    "QUANTITY" = "src"."QUANTITY",
    "UNIT_PRICE" = "src"."UNIT_PRICE",
    "STATUS" = "src"."STATUS",
    "EMAIL_HASH" = "src"."EMAIL_HASH",
    "CREATED_AT" = "src"."CREATED_AT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS",
    "_DELETED" = FALSE,
    "_DELETED_AT" = NULL
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_DELETED",
    "_DELETED_AT"
) VALUES (
    "src"."ORDER_ID",
    "src"."LINE_NO",
    "src"."PRODUCT_SKU",
    "src"."QUANTITY",
    "src"."UNIT_PRICE",
    "src"."STATUS",
    "src"."EMAIL_HASH",
    "src"."CREATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS",
    FALSE,
    NULL
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- each snapshot batch (a group of chunk files; the warehouse runs the transform step over them):

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDER_LINES" (
  "ORDER_ID" DECIMAL(20,0),
  "LINE_NO" INTEGER,
  "PRODUCT_SKU" VARCHAR,
  "QUANTITY" INTEGER,
  "UNIT_PRICE" DECIMAL(12,2),
  "STATUS" VARCHAR,
  "EMAIL_HASH" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_ORDER_LINES";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_ORDER_LINES" BY NAME
WITH batch AS (
  SELECT * EXCLUDE (file_row_number), file_row_number AS "__replicator_ord" FROM read_parquet(?, file_row_number = true)
),
split AS (
  SELECT *, 1 AS "__replicator_sub" FROM batch
),
last AS (
  SELECT * FROM split
),
judged AS (
  SELECT *, coalesce(((CAST("status" AS VARCHAR) <> 'test')), FALSE) AS "__replicator_pass" FROM last
),
kept AS (
  SELECT *, CASE WHEN "__replicator_op" <> 'd' AND NOT "__replicator_pass" THEN 'd' ELSE "__replicator_op" END AS "__replicator_final_op" FROM judged
)
SELECT CAST("order_id" AS DECIMAL(20,0)) AS "ORDER_ID", CAST("line_no" AS INTEGER) AS "LINE_NO", "sku" AS "PRODUCT_SKU", CAST("qty" AS INTEGER) AS "QUANTITY", CAST(round_even("unit_price", 2) AS DECIMAL(12,2)) AS "UNIT_PRICE", "status" AS "STATUS", sha256("customer_email") AS "EMAIL_HASH", CAST("created_at" AS TIMESTAMP) AS "CREATED_AT", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_file" AS "_BINLOG_FILE", "__replicator_pos" AS "_BINLOG_POS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

-- merge staged changes
MERGE INTO "MAIN"."ORDER_LINES" AS "tgt"
USING (
  SELECT
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDER_LINES"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID", "LINE_NO" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ORDER_ID" = "src"."ORDER_ID" AND "tgt"."LINE_NO" = "src"."LINE_NO"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_DELETED" = TRUE,
    "_DELETED_AT" = "src"."_REPLICATOR_TS",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN MATCHED THEN UPDATE SET
    "PRODUCT_SKU" = "src"."PRODUCT_SKU",
    "QUANTITY" = "src"."QUANTITY",
    "UNIT_PRICE" = "src"."UNIT_PRICE",
    "STATUS" = "src"."STATUS",
    "EMAIL_HASH" = "src"."EMAIL_HASH",
    "CREATED_AT" = "src"."CREATED_AT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS",
    "_DELETED" = FALSE,
    "_DELETED_AT" = NULL
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_DELETED",
    "_DELETED_AT"
) VALUES (
    "src"."ORDER_ID",
    "src"."LINE_NO",
    "src"."PRODUCT_SKU",
    "src"."QUANTITY",
    "src"."UNIT_PRICE",
    "src"."STATUS",
    "src"."EMAIL_HASH",
    "src"."CREATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS",
    FALSE,
    NULL
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "MAIN"."ORDER_LINES" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "MAIN"."ORDER_LINES" (
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_DELETED",
    "_DELETED_AT"
)
SELECT
    "src"."ORDER_ID",
    "src"."LINE_NO",
    "src"."PRODUCT_SKU",
    "src"."QUANTITY",
    "src"."UNIT_PRICE",
    "src"."STATUS",
    "src"."EMAIL_HASH",
    "src"."CREATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS",
    FALSE,
    NULL
FROM (
  SELECT
    "ORDER_ID",
    "LINE_NO",
    "PRODUCT_SKU",
    "QUANTITY",
    "UNIT_PRICE",
    "STATUS",
    "EMAIL_HASH",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDER_LINES"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID", "LINE_NO" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
