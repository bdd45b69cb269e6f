-- shop.outbox[order] -> MAIN.ORDERS (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `aggregate_type`, `aggregate_id`, `payload` FROM `shop`.`outbox`

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS" (
  "ORDER_ID" NUMBER(20,0) NOT NULL,
  "CUSTOMER_ID" NUMBER(20,0),
  "STATUS" VARCHAR,
  "AMOUNT" NUMBER(12,2),
  "PLACED_AT" TIMESTAMP_NTZ(6),
  "FIRST_SKU" VARCHAR,
  "LINES" VARIANT,
  "GIFT_NOTE" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  PRIMARY KEY ("ORDER_ID")
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
CREATE TRANSIENT TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STAGE_ORDERS" (
  "ORDER_ID" NUMBER(20,0),
  "CUSTOMER_ID" NUMBER(20,0),
  "STATUS" VARCHAR,
  "AMOUNT" NUMBER(12,2),
  "PLACED_AT" TIMESTAMP_NTZ(6),
  "FIRST_SKU" VARCHAR,
  "LINES" VARCHAR,
  "GIFT_NOTE" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."ORDERS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "MAIN"."ORDERS";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "MAIN"."_REPLICATOR_STAGE_ORDERS" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "MAIN"."_REPLICATOR_STAGE_ORDERS";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"MAIN".%_REPLICATOR_STAGE_ORDERS/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "MAIN"."_REPLICATOR_STAGE_ORDERS"
  FROM @"MAIN".%_REPLICATOR_STAGE_ORDERS/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

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
    PARSE_JSON("LINES") AS "LINES",
    "GIFT_NOTE",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "MAIN"."_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ORDER_ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ORDER_ID" = "src"."ORDER_ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."CUSTOMER_ID" = "src"."CUSTOMER_ID",
    "tgt"."STATUS" = "src"."STATUS",
    "tgt"."AMOUNT" = "src"."AMOUNT",
    "tgt"."PLACED_AT" = "src"."PLACED_AT",
    "tgt"."FIRST_SKU" = "src"."FIRST_SKU",
    "tgt"."LINES" = "src"."LINES",
    "tgt"."GIFT_NOTE" = "src"."GIFT_NOTE",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "tgt"."_BINLOG_POS" = "src"."_BINLOG_POS"
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
