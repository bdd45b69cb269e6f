-- shop.order_lines -> MAIN.ORDER_LINES (snowflake)

-- transforms, evaluated by DuckDB over each change batch before staging (Spark SQL translated):
--   filter: status <> 'test'
--     -> (CAST("status" AS VARCHAR) <> 'test')
--   EMAIL_HASH: mask sha256 of the value's text

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `order_id`, `line_no`, `sku`, `qty`, CAST(`unit_price` AS CHAR) AS `unit_price`, `status`, `customer_email`, `password_hash`, CAST(`created_at` AS CHAR) AS `created_at` FROM `shop`.`order_lines`
--   (no filter is pushed down: no part of it is provably exact in MySQL, or a table reading the same source needs every row)

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDER_LINES" (
  "ORDER_ID" NUMBER(20,0) NOT NULL,
  "LINE_NO" NUMBER(5,0) NOT NULL,
  "PRODUCT_SKU" VARCHAR,
  "QUANTITY" NUMBER(10,0),
  "UNIT_PRICE" NUMBER(12,2),
  "STATUS" VARCHAR,
  "EMAIL_HASH" VARCHAR,
  "CREATED_AT" TIMESTAMP_NTZ(6),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_DELETED" BOOLEAN,
  "_DELETED_AT" TIMESTAMP_TZ(6),
  PRIMARY KEY ("ORDER_ID", "LINE_NO")
);

-- create state table
CREATE TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STATE" (
  "PIPELINE" VARCHAR NOT NULL,
  "TABLE" VARCHAR NOT NULL,
  "BATCH_ID" NUMBER(19,0) NOT NULL,
  "END_OFFSET" VARCHAR,
  "APPLIED_AT" TIMESTAMP_TZ(6) NOT NULL,
  PRIMARY KEY ("PIPELINE", "TABLE", "BATCH_ID")
);

-- create staging table
CREATE TRANSIENT TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STAGE_ORDER_LINES" (
  "ORDER_ID" NUMBER(20,0),
  "LINE_NO" NUMBER(5,0),
  "PRODUCT_SKU" VARCHAR,
  "QUANTITY" NUMBER(10,0),
  "UNIT_PRICE" NUMBER(12,2),
  "STATUS" VARCHAR,
  "EMAIL_HASH" VARCHAR,
  "CREATED_AT" TIMESTAMP_NTZ(6),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."ORDER_LINES" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "MAIN"."ORDER_LINES";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "MAIN"."_REPLICATOR_STAGE_ORDER_LINES" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "MAIN"."_REPLICATOR_STAGE_ORDER_LINES";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"MAIN".%_REPLICATOR_STAGE_ORDER_LINES/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "MAIN"."_REPLICATOR_STAGE_ORDER_LINES"
  FROM @"MAIN".%_REPLICATOR_STAGE_ORDER_LINES/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

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
  FROM "MAIN"."_REPLICATOR_STAGE_ORDER_LINES"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID", "LINE_NO" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ORDER_ID" = "src"."ORDER_ID" AND "tgt"."LINE_NO" = "src"."LINE_NO"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "tgt"."_DELETED" = TRUE,
    "tgt"."_DELETED_AT" = "src"."_REPLICATOR_TS",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "tgt"."_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN MATCHED THEN UPDATE SET
    "tgt"."PRODUCT_SKU" = "src"."PRODUCT_SKU",
    "tgt"."QUANTITY" = "src"."QUANTITY",
    "tgt"."UNIT_PRICE" = "src"."UNIT_PRICE",
    "tgt"."STATUS" = "src"."STATUS",
    "tgt"."EMAIL_HASH" = "src"."EMAIL_HASH",
    "tgt"."CREATED_AT" = "src"."CREATED_AT",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "tgt"."_BINLOG_POS" = "src"."_BINLOG_POS",
    "tgt"."_DELETED" = FALSE,
    "tgt"."_DELETED_AT" = NULL
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

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
  FROM "MAIN"."_REPLICATOR_STAGE_ORDER_LINES"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID", "LINE_NO" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
