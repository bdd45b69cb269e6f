-- shop.orders -> MAIN.ORDERS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `customer_id`, `status`, CAST(`amount` AS CHAR) AS `amount` FROM `shop`.`orders`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS" (
  "ID" BIGINT NOT NULL,
  "CUSTOMER_ID" BIGINT,
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  PRIMARY KEY ("ID")
);

-- create log table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS_LOG" (
  "ID" BIGINT NOT NULL,
  "CUSTOMER_ID" BIGINT,
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
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
SELECT * FROM "MAIN"."ORDERS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- read the log table's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."ORDERS_LOG" LIMIT 0;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDERS" (
  "ID" BIGINT,
  "CUSTOMER_ID" BIGINT,
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_DELETED" BOOLEAN,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" BIGINT,
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
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "CUSTOMER_ID" = "src"."CUSTOMER_ID",
    "STATUS" = "src"."STATUS",
    "AMOUNT" = "src"."AMOUNT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS"
) VALUES (
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."AMOUNT",
    "src"."_OP",
    "src"."_TS_MS"
);

-- append every change to the log table
INSERT INTO "MAIN"."ORDERS_LOG" (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
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
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "_REPLICATOR_STAGE_ORDERS"
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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDERS" (
  "ID" BIGINT,
  "CUSTOMER_ID" BIGINT,
  "STATUS" VARCHAR,
  "AMOUNT" DECIMAL(12,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_DELETED" BOOLEAN,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  "_TRANSACTION_ID" VARCHAR,
  "_TRANSACTION_ORDER" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_ORDERS";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_ORDERS" BY NAME
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
SELECT CAST("id" AS BIGINT) AS "ID", CAST("customer_id" AS BIGINT) AS "CUSTOMER_ID", "status" AS "STATUS", CAST(round_even("amount", 2) AS DECIMAL(12,2)) AS "AMOUNT", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", ("__replicator_final_op" = 'd') AS "_DELETED", "__replicator_file" AS "_BINLOG_FILE", "__replicator_pos" AS "_BINLOG_POS", "__replicator_transaction_id" AS "_TRANSACTION_ID", "__replicator_row_index" AS "_TRANSACTION_ORDER", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

-- merge staged changes
MERGE INTO "MAIN"."ORDERS" AS "tgt"
USING (
  SELECT
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "CUSTOMER_ID" = "src"."CUSTOMER_ID",
    "STATUS" = "src"."STATUS",
    "AMOUNT" = "src"."AMOUNT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS"
) VALUES (
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."AMOUNT",
    "src"."_OP",
    "src"."_TS_MS"
);

-- append every change to the log table
INSERT INTO "MAIN"."ORDERS_LOG" (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
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
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_DELETED",
    "_TS_MS",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_TRANSACTION_ID",
    "_TRANSACTION_ORDER"
  FROM "_REPLICATOR_STAGE_ORDERS"
  ORDER BY "_REPLICATOR_SEQ";

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "MAIN"."ORDERS" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "MAIN"."ORDERS" (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS"
)
SELECT
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."AMOUNT",
    "src"."_OP",
    "src"."_TS_MS"
FROM (
  SELECT
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "AMOUNT",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
