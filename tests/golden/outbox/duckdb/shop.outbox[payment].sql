-- shop.outbox[payment] -> MAIN.PAYMENT_EVENTS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `aggregate_type`, `aggregate_id`, `payload` FROM `shop`.`outbox`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."PAYMENT_EVENTS" (
  "EVENT_ID" DECIMAL(20,0),
  "PAYMENT_ID" DECIMAL(20,0) NOT NULL,
  "ORDER_ID" DECIMAL(20,0),
  "AMOUNT" DECIMAL(12,2),
  "PAID_AT" TIMESTAMPTZ,
  "_OP" VARCHAR,
  "_DELETED" BOOLEAN,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" BIGINT
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
SELECT * FROM "MAIN"."PAYMENT_EVENTS" LIMIT 0;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_PAYMENT_EVENTS" (
  "EVENT_ID" DECIMAL(20,0),
  "PAYMENT_ID" DECIMAL(20,0),
  "ORDER_ID" DECIMAL(20,0),
  "AMOUNT" DECIMAL(12,2),
  "PAID_AT" TIMESTAMPTZ,
  "_OP" VARCHAR,
  "_DELETED" BOOLEAN,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_PAYMENT_EVENTS";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_PAYMENT_EVENTS" BY NAME
SELECT * FROM read_parquet(?);

-- append every change
INSERT INTO "MAIN"."PAYMENT_EVENTS" (
    "EVENT_ID",
    "PAYMENT_ID",
    "ORDER_ID",
    "AMOUNT",
    "PAID_AT",
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
)
SELECT
    "EVENT_ID",
    "PAYMENT_ID",
    "ORDER_ID",
    "AMOUNT",
    "PAID_AT",
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "_REPLICATOR_STAGE_PAYMENT_EVENTS"
  ORDER BY "_REPLICATOR_SEQ";

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
