-- shop.order_events -> MAIN.ORDER_CHANGES (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `order_id`, `note`, `payload` FROM `shop`.`order_events`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDER_CHANGES" (
  "ID" BIGINT NOT NULL,
  "ORDER_ID" BIGINT,
  "NOTE" VARCHAR,
  "PAYLOAD" JSON,
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
SELECT * FROM "MAIN"."ORDER_CHANGES" LIMIT 0;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDER_CHANGES" (
  "ID" BIGINT,
  "ORDER_ID" BIGINT,
  "NOTE" VARCHAR,
  "PAYLOAD" VARCHAR,
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
DELETE FROM "_REPLICATOR_STAGE_ORDER_CHANGES";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_ORDER_CHANGES" BY NAME
SELECT * FROM read_parquet(?);

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
    CAST("PAYLOAD" AS JSON),
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "_REPLICATOR_STAGE_ORDER_CHANGES"
  ORDER BY "_REPLICATOR_SEQ";

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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDER_CHANGES" (
  "ID" BIGINT,
  "ORDER_ID" BIGINT,
  "NOTE" VARCHAR,
  "PAYLOAD" VARCHAR,
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
DELETE FROM "_REPLICATOR_STAGE_ORDER_CHANGES";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_ORDER_CHANGES" BY NAME
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
  SELECT *, TRUE AS "__replicator_pass" FROM last
),
kept AS (
  SELECT *, CASE WHEN "__replicator_op" <> 'd' AND NOT "__replicator_pass" THEN 'd' ELSE "__replicator_op" END AS "__replicator_final_op" FROM judged WHERE "__replicator_pass" OR "__replicator_op" = 'u'
)
SELECT CAST("id" AS BIGINT) AS "ID", CAST("order_id" AS BIGINT) AS "ORDER_ID", "note" AS "NOTE", "payload" AS "PAYLOAD", "__replicator_final_op" AS "_OP", ("__replicator_final_op" = 'd') AS "_DELETED", "__replicator_ts_ms" AS "_TS_MS", "__replicator_file" AS "_BINLOG_FILE", "__replicator_pos" AS "_BINLOG_POS", "__replicator_transaction_id" AS "_TRANSACTION_ID", "__replicator_row_index" AS "_TRANSACTION_ORDER", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

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
    CAST("PAYLOAD" AS JSON),
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "_REPLICATOR_STAGE_ORDER_CHANGES"
  ORDER BY "_REPLICATOR_SEQ";

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
