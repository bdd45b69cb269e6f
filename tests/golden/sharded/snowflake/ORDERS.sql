-- shop_[0-9]+\.orders except shop_0\.orders -> MAIN.ORDERS (snowflake)
-- sources: every table the patterns match at run time, keyed by _SOURCE_TABLE

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS" (
  "_SOURCE_TABLE" VARCHAR NOT NULL,
  "ID" NUMBER(19,0) NOT NULL,
  "CUSTOMER" VARCHAR,
  "AMOUNT" NUMBER(12,2),
  "STATUS" VARCHAR,
  "CREATED_AT" TIMESTAMP_NTZ(6),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  PRIMARY KEY ("_SOURCE_TABLE", "ID")
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
  "_SOURCE_TABLE" VARCHAR,
  "ID" NUMBER(19,0),
  "CUSTOMER" VARCHAR,
  "AMOUNT" NUMBER(12,2),
  "STATUS" VARCHAR,
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
    "_SOURCE_TABLE",
    "ID",
    "CUSTOMER",
    "AMOUNT",
    "STATUS",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "MAIN"."_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_SOURCE_TABLE", "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."_SOURCE_TABLE" = "src"."_SOURCE_TABLE" AND "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."CUSTOMER" = "src"."CUSTOMER",
    "tgt"."AMOUNT" = "src"."AMOUNT",
    "tgt"."STATUS" = "src"."STATUS",
    "tgt"."CREATED_AT" = "src"."CREATED_AT",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "tgt"."_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "_SOURCE_TABLE",
    "ID",
    "CUSTOMER",
    "AMOUNT",
    "STATUS",
    "CREATED_AT",
    "_OP",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS"
) VALUES (
    "src"."_SOURCE_TABLE",
    "src"."ID",
    "src"."CUSTOMER",
    "src"."AMOUNT",
    "src"."STATUS",
    "src"."CREATED_AT",
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
