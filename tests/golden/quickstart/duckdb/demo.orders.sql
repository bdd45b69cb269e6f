-- demo.orders -> MAIN.ORDERS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `customer_id`, `status`, CAST(`total` AS CHAR) AS `total`, CAST(`updated_at` AS CHAR) AS `updated_at` FROM `demo`.`orders`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."ORDERS" (
  "ID" INTEGER NOT NULL,
  "CUSTOMER_ID" INTEGER,
  "STATUS" VARCHAR,
  "TOTAL" DECIMAL(12,2),
  "UPDATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_SYNCED_AT" TIMESTAMPTZ,
  PRIMARY KEY ("ID")
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
  "ID" INTEGER,
  "CUSTOMER_ID" INTEGER,
  "STATUS" VARCHAR,
  "TOTAL" DECIMAL(12,2),
  "UPDATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
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
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
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
    "TOTAL" = "src"."TOTAL",
    "UPDATED_AT" = "src"."UPDATED_AT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
) VALUES (
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."TOTAL",
    "src"."UPDATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_ORDERS" (
  "ID" INTEGER,
  "CUSTOMER_ID" INTEGER,
  "STATUS" VARCHAR,
  "TOTAL" DECIMAL(12,2),
  "UPDATED_AT" TIMESTAMP,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
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
  SELECT *, CASE WHEN "__replicator_op" <> 'd' AND NOT "__replicator_pass" THEN 'd' ELSE "__replicator_op" END AS "__replicator_final_op" FROM judged
)
SELECT CAST("id" AS INTEGER) AS "ID", CAST("customer_id" AS INTEGER) AS "CUSTOMER_ID", "status" AS "STATUS", CAST(round_even("total", 2) AS DECIMAL(12,2)) AS "TOTAL", CAST("updated_at" AS TIMESTAMP) AS "UPDATED_AT", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

-- merge staged changes
MERGE INTO "MAIN"."ORDERS" AS "tgt"
USING (
  SELECT
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
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
    "TOTAL" = "src"."TOTAL",
    "UPDATED_AT" = "src"."UPDATED_AT",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
) VALUES (
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."TOTAL",
    "src"."UPDATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
);

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
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
)
SELECT
    "src"."ID",
    "src"."CUSTOMER_ID",
    "src"."STATUS",
    "src"."TOTAL",
    "src"."UPDATED_AT",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
FROM (
  SELECT
    "ID",
    "CUSTOMER_ID",
    "STATUS",
    "TOTAL",
    "UPDATED_AT",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_ORDERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "MAIN"."ORDERS" WHERE "_SYNCED_AT" < (SELECT "APPLIED_AT" FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?);
