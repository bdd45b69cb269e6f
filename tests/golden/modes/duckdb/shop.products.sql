-- shop.products -> MAIN.PRODUCTS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `sku`, `title`, CAST(`price` AS CHAR) AS `price` FROM `shop`.`products`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."PRODUCTS" (
  "SKU" VARCHAR NOT NULL,
  "TITLE" VARCHAR,
  "PRICE" DECIMAL(10,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_SYNCED_AT" TIMESTAMPTZ,
  "_DELETED" BOOLEAN,
  "_DELETED_AT" TIMESTAMPTZ,
  PRIMARY KEY ("SKU")
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
SELECT * FROM "MAIN"."PRODUCTS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_PRODUCTS" (
  "SKU" VARCHAR,
  "TITLE" VARCHAR,
  "PRICE" DECIMAL(10,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_PRODUCTS";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_PRODUCTS" BY NAME
SELECT * FROM read_parquet(?);

-- merge staged changes
MERGE INTO "MAIN"."PRODUCTS" AS "tgt"
USING (
  SELECT
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_PRODUCTS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "SKU" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."SKU" = "src"."SKU"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_DELETED" = TRUE,
    "_DELETED_AT" = "src"."_REPLICATOR_TS",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN MATCHED THEN UPDATE SET
    "TITLE" = "src"."TITLE",
    "PRICE" = "src"."PRICE",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT",
    "_DELETED" = FALSE,
    "_DELETED_AT" = NULL
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_DELETED",
    "_DELETED_AT"
) VALUES (
    "src"."SKU",
    "src"."TITLE",
    "src"."PRICE",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_PRODUCTS" (
  "SKU" VARCHAR,
  "TITLE" VARCHAR,
  "PRICE" DECIMAL(10,2),
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_PRODUCTS";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_PRODUCTS" BY NAME
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
SELECT "sku" AS "SKU", "title" AS "TITLE", CAST(round_even("price", 2) AS DECIMAL(10,2)) AS "PRICE", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

-- merge staged changes
MERGE INTO "MAIN"."PRODUCTS" AS "tgt"
USING (
  SELECT
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_PRODUCTS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "SKU" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."SKU" = "src"."SKU"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_DELETED" = TRUE,
    "_DELETED_AT" = "src"."_REPLICATOR_TS",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN MATCHED THEN UPDATE SET
    "TITLE" = "src"."TITLE",
    "PRICE" = "src"."PRICE",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT",
    "_DELETED" = FALSE,
    "_DELETED_AT" = NULL
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_DELETED",
    "_DELETED_AT"
) VALUES (
    "src"."SKU",
    "src"."TITLE",
    "src"."PRICE",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
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
SELECT 1 FROM "MAIN"."PRODUCTS" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "MAIN"."PRODUCTS" (
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_DELETED",
    "_DELETED_AT"
)
SELECT
    "src"."SKU",
    "src"."TITLE",
    "src"."PRICE",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
    FALSE,
    NULL
FROM (
  SELECT
    "SKU",
    "TITLE",
    "PRICE",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_PRODUCTS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "SKU" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
