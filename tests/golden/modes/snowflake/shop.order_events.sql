-- shop.order_events -> MAIN.ORDER_CHANGES (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `order_id`, `note`, `payload` FROM `shop`.`order_events`

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDER_CHANGES" (
  "ID" NUMBER(19,0) NOT NULL,
  "ORDER_ID" NUMBER(19,0),
  "NOTE" VARCHAR,
  "PAYLOAD" VARIANT,
  "_OP" VARCHAR,
  "_DELETED" BOOLEAN,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" NUMBER(10,0)
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
CREATE TRANSIENT TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STAGE_ORDER_CHANGES" (
  "ID" NUMBER(19,0),
  "ORDER_ID" NUMBER(19,0),
  "NOTE" VARCHAR,
  "PAYLOAD" VARCHAR,
  "_OP" VARCHAR,
  "_DELETED" BOOLEAN,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" NUMBER(10,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."ORDER_CHANGES" LIMIT 0;

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "MAIN"."_REPLICATOR_STAGE_ORDER_CHANGES" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "MAIN"."_REPLICATOR_STAGE_ORDER_CHANGES";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"MAIN".%_REPLICATOR_STAGE_ORDER_CHANGES/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "MAIN"."_REPLICATOR_STAGE_ORDER_CHANGES"
  FROM @"MAIN".%_REPLICATOR_STAGE_ORDER_CHANGES/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

-- append every change
INSERT INTO "MAIN"."ORDER_CHANGES" (
    "ID",
    "ORDER_ID",
    "NOTE",
    "PAYLOAD",
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
)
SELECT
    "ID",
    "ORDER_ID",
    "NOTE",
    PARSE_JSON("PAYLOAD"),
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "MAIN"."_REPLICATOR_STAGE_ORDER_CHANGES"
  ORDER BY "_REPLICATOR_SEQ";

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
