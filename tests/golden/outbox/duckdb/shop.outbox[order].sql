-- shop.outbox[order] -> MAIN.ORDERS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `aggregate_type`, `aggregate_id`, `payload` FROM `shop`.`outbox`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS" (
  "ORDER_ID" DECIMAL(20,0) NOT NULL,
  "CUSTOMER_ID" DECIMAL(20,0),
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
  "PLACED_AT" TIMESTAMP,
  "FIRST_SKU" VARCHAR,
  "LINES" JSON,
  "GIFT_NOTE" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  PRIMARY KEY ("ORDER_ID")
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
SELECT * FROM "MAIN"."ORDERS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDERS" (
  "ORDER_ID" DECIMAL(20,0),
  "CUSTOMER_ID" DECIMAL(20,0),
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
  "PLACED_AT" TIMESTAMP,
  "FIRST_SKU" VARCHAR,
  "LINES" VARCHAR,
  "GIFT_NOTE" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_ORDERS";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_ORDERS" BY NAME
SELECT * FROM read_parquet(?);

-- merge staged changes
MERGE INTO "MAIN"."ORDERS" AS "tgt"
USING (
  SELECT
    "ORDER_ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "PLACED_AT",
    "FIRST_SKU",
    CAST("LINES" AS JSON) AS "LINES",
    "GIFT_NOTE",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ORDER_ID" = "src"."ORDER_ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "CUSTOMER_ID" = "src"."CUSTOMER_ID",
    "STATUS" = "src"."STATUS",
    "AMOUNT" = "src"."AMOUNT",
    "PLACED_AT" = "src"."PLACED_AT",
    "FIRST_SKU" = "src"."FIRST_SKU",
    "LINES" = "src"."LINES",
    "GIFT_NOTE" = "src"."GIFT_NOTE",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ORDER_ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "PLACED_AT",
    "FIRST_SKU",
    "LINES",
    "GIFT_NOTE",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS"
) VALUES (
    "src"."ORDER_ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."AMOUNT",
    "src"."PLACED_AT",
    "src"."FIRST_SKU",
    "src"."LINES",
    "src"."GIFT_NOTE",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS"
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
