-- shop.customers -> MAIN.CUSTOMERS (duckdb)

-- transforms, evaluated by DuckDB over each change batch before staging (Spark SQL translated):
--   EMAIL: mask sha256 of the value's text

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `name`, `email`, `tier`, `city` FROM `shop`.`customers`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "ID" INTEGER NOT NULL,
  "NAME" VARCHAR,
  "EMAIL" VARCHAR,
  "TIER" VARCHAR,
  "CITY" VARCHAR,
  "_OP" VARCHAR,
  "_VALID_FROM" TIMESTAMPTZ NOT NULL,
  "_VALID_TO" TIMESTAMPTZ,
  "_IS_CURRENT" BOOLEAN NOT NULL,
  "_CHANGE_SEQ" VARCHAR NOT NULL
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
SELECT * FROM "MAIN"."CUSTOMERS" LIMIT 0;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_CUSTOMERS" (
  "ID" INTEGER,
  "NAME" VARCHAR,
  "EMAIL" VARCHAR,
  "TIER" VARCHAR,
  "CITY" VARCHAR,
  "_OP" VARCHAR,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ,
  "_REPLICATOR_VALID_TO" TIMESTAMPTZ,
  "_REPLICATOR_CHANGE_SEQ" VARCHAR
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_CUSTOMERS";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_CUSTOMERS" BY NAME
SELECT * FROM read_parquet(?);

-- drop versions already applied
DELETE FROM "_REPLICATOR_STAGE_CUSTOMERS"
WHERE EXISTS (
  SELECT 1 FROM "MAIN"."CUSTOMERS" AS "tgt"
  WHERE "tgt"."ID" = "_REPLICATOR_STAGE_CUSTOMERS"."ID"
    AND "tgt"."_CHANGE_SEQ" >= "_REPLICATOR_STAGE_CUSTOMERS"."_REPLICATOR_CHANGE_SEQ"
);

-- insert new versions
INSERT INTO "MAIN"."CUSTOMERS" (
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_VALID_FROM",
    "_VALID_TO",
    "_IS_CURRENT",
    "_CHANGE_SEQ"
)
SELECT
    "src"."ID",
    "src"."NAME",
    "src"."EMAIL",
    "src"."TIER",
    "src"."CITY",
    "src"."_OP",
    "src"."_REPLICATOR_TS",
    "src"."_REPLICATOR_VALID_TO",
    "src"."_REPLICATOR_VALID_TO" IS NULL,
    "src"."_REPLICATOR_CHANGE_SEQ"
FROM (
  SELECT
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_REPLICATOR_OP",
    "_REPLICATOR_SEQ",
    "_REPLICATOR_TS",
    "_REPLICATOR_VALID_TO",
    "_REPLICATOR_CHANGE_SEQ"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd'
  AND NOT (
    "src"."_REPLICATOR_SEQ" = (SELECT MIN("s2"."_REPLICATOR_SEQ") FROM "_REPLICATOR_STAGE_CUSTOMERS" AS "s2" WHERE "s2"."ID" = "src"."ID")
    AND EXISTS (
      SELECT 1 FROM "MAIN"."CUSTOMERS" AS "tgt"
      WHERE "tgt"."ID" = "src"."ID"
        AND "tgt"."_IS_CURRENT"
        AND "tgt"."TIER" IS NOT DISTINCT FROM "src"."TIER" AND "tgt"."CITY" IS NOT DISTINCT FROM "src"."CITY"
    )
  )
ORDER BY "src"."_REPLICATOR_SEQ";

-- end or update current versions
MERGE INTO "MAIN"."CUSTOMERS" AS "tgt"
USING (
  SELECT
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_REPLICATOR_OP",
    "_REPLICATOR_SEQ",
    "_REPLICATOR_TS",
    "_REPLICATOR_VALID_TO",
    "_REPLICATOR_CHANGE_SEQ"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ") = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
  AND "tgt"."_IS_CURRENT"
  AND "tgt"."_CHANGE_SEQ" < "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_VALID_TO" = "src"."_REPLICATOR_TS",
    "_IS_CURRENT" = FALSE,
    "_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "tgt"."TIER" IS NOT DISTINCT FROM "src"."TIER" AND "tgt"."CITY" IS NOT DISTINCT FROM "src"."CITY" THEN UPDATE SET
    "NAME" = "src"."NAME",
    "EMAIL" = "src"."EMAIL",
    "TIER" = "src"."TIER",
    "CITY" = "src"."CITY",
    "_OP" = "src"."_OP",
    "_VALID_TO" = "src"."_REPLICATOR_VALID_TO",
    "_IS_CURRENT" = "src"."_REPLICATOR_VALID_TO" IS NULL,
    "_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED THEN UPDATE SET
    "_VALID_TO" = "src"."_REPLICATOR_TS",
    "_IS_CURRENT" = FALSE;

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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_CUSTOMERS" (
  "ID" INTEGER,
  "NAME" VARCHAR,
  "EMAIL" VARCHAR,
  "TIER" VARCHAR,
  "CITY" VARCHAR,
  "_OP" VARCHAR,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ,
  "_REPLICATOR_VALID_TO" TIMESTAMPTZ,
  "_REPLICATOR_CHANGE_SEQ" VARCHAR
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_CUSTOMERS";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_CUSTOMERS" BY NAME
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
),
ordered AS (
  SELECT *, row_number() OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_n", min("__replicator_global") OVER (PARTITION BY "id") AS "__replicator_key_first", lag("__replicator_final_op") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS __prev_op, lead("__replicator_final_op") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS __next_op, lead("__replicator_ts_ms") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS __next_ts, (lpad(CAST("__replicator_file_seq" AS VARCHAR), 10, '0') || '.' || lpad(CAST("__replicator_pos" AS VARCHAR), 20, '0') || '.' || CASE WHEN "__replicator_op" = 'r' THEN '0' ELSE '1' END || lpad(CAST("__replicator_row_index" AS VARCHAR), 10, '0')) AS __seq, lead((lpad(CAST("__replicator_file_seq" AS VARCHAR), 10, '0') || '.' || lpad(CAST("__replicator_pos" AS VARCHAR), 20, '0') || '.' || CASE WHEN "__replicator_op" = 'r' THEN '0' ELSE '1' END || lpad(CAST("__replicator_row_index" AS VARCHAR), 10, '0'))) OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS __next_seq, lag("tier") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_n_prev_0", lead("tier") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_n_next_0", lag("city") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_n_prev_1", lead("city") OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_n_next_1" FROM (SELECT *, row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_global" FROM kept)
),
marked AS (
  SELECT *, sum(CASE WHEN "__replicator_final_op" <> 'd' AND (__prev_op IS NULL OR __prev_op = 'd' OR "tier" IS DISTINCT FROM "__replicator_n_prev_0" OR "city" IS DISTINCT FROM "__replicator_n_prev_1") THEN 1 ELSE 0 END) OVER (PARTITION BY "id" ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord" ROWS UNBOUNDED PRECEDING) AS __version FROM ordered
),
grouped AS (
  SELECT *, first_value("__replicator_ts_ms") OVER (PARTITION BY "id", __version, "__replicator_final_op" = 'd' ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") AS "__replicator_valid_from" FROM marked
),
versions AS (
  SELECT *, CASE WHEN "__replicator_final_op" = 'd' OR __next_op IS NULL THEN NULL ELSE __next_ts END AS "__replicator_valid_to", CASE WHEN __next_op = 'd' AND "__replicator_final_op" <> 'd' THEN __next_seq ELSE __seq END AS "__replicator_version_seq" FROM grouped WHERE ("__replicator_final_op" <> 'd' AND (__next_op IS NULL OR __next_op = 'd' OR "tier" IS DISTINCT FROM "__replicator_n_next_0" OR "city" IS DISTINCT FROM "__replicator_n_next_1")) OR ("__replicator_final_op" = 'd' AND "__replicator_n" = 1)
)
SELECT CAST("id" AS INTEGER) AS "ID", "name" AS "NAME", sha256("email") AS "EMAIL", "tier" AS "TIER", "city" AS "CITY", "__replicator_final_op" AS "_OP", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_valid_from" * 1000)) AS "_REPLICATOR_TS", timezone('UTC', make_timestamp("__replicator_valid_to" * 1000)) AS "_REPLICATOR_VALID_TO", "__replicator_version_seq" AS "_REPLICATOR_CHANGE_SEQ", row_number() OVER (ORDER BY "__replicator_key_first", "__replicator_n") - 1 AS "_REPLICATOR_SEQ"
FROM versions;

-- drop versions already applied
DELETE FROM "_REPLICATOR_STAGE_CUSTOMERS"
WHERE EXISTS (
  SELECT 1 FROM "MAIN"."CUSTOMERS" AS "tgt"
  WHERE "tgt"."ID" = "_REPLICATOR_STAGE_CUSTOMERS"."ID"
    AND "tgt"."_CHANGE_SEQ" >= "_REPLICATOR_STAGE_CUSTOMERS"."_REPLICATOR_CHANGE_SEQ"
);

-- insert new versions
INSERT INTO "MAIN"."CUSTOMERS" (
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_VALID_FROM",
    "_VALID_TO",
    "_IS_CURRENT",
    "_CHANGE_SEQ"
)
SELECT
    "src"."ID",
    "src"."NAME",
    "src"."EMAIL",
    "src"."TIER",
    "src"."CITY",
    "src"."_OP",
    "src"."_REPLICATOR_TS",
    "src"."_REPLICATOR_VALID_TO",
    "src"."_REPLICATOR_VALID_TO" IS NULL,
    "src"."_REPLICATOR_CHANGE_SEQ"
FROM (
  SELECT
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_REPLICATOR_OP",
    "_REPLICATOR_SEQ",
    "_REPLICATOR_TS",
    "_REPLICATOR_VALID_TO",
    "_REPLICATOR_CHANGE_SEQ"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd'
  AND NOT (
    "src"."_REPLICATOR_SEQ" = (SELECT MIN("s2"."_REPLICATOR_SEQ") FROM "_REPLICATOR_STAGE_CUSTOMERS" AS "s2" WHERE "s2"."ID" = "src"."ID")
    AND EXISTS (
      SELECT 1 FROM "MAIN"."CUSTOMERS" AS "tgt"
      WHERE "tgt"."ID" = "src"."ID"
        AND "tgt"."_IS_CURRENT"
        AND "tgt"."TIER" IS NOT DISTINCT FROM "src"."TIER" AND "tgt"."CITY" IS NOT DISTINCT FROM "src"."CITY"
    )
  )
ORDER BY "src"."_REPLICATOR_SEQ";

-- end or update current versions
MERGE INTO "MAIN"."CUSTOMERS" AS "tgt"
USING (
  SELECT
    "ID",
    "NAME",
    "EMAIL",
    "TIER",
    "CITY",
    "_OP",
    "_REPLICATOR_OP",
    "_REPLICATOR_SEQ",
    "_REPLICATOR_TS",
    "_REPLICATOR_VALID_TO",
    "_REPLICATOR_CHANGE_SEQ"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ") = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
  AND "tgt"."_IS_CURRENT"
  AND "tgt"."_CHANGE_SEQ" < "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_VALID_TO" = "src"."_REPLICATOR_TS",
    "_IS_CURRENT" = FALSE,
    "_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "tgt"."TIER" IS NOT DISTINCT FROM "src"."TIER" AND "tgt"."CITY" IS NOT DISTINCT FROM "src"."CITY" THEN UPDATE SET
    "NAME" = "src"."NAME",
    "EMAIL" = "src"."EMAIL",
    "TIER" = "src"."TIER",
    "CITY" = "src"."CITY",
    "_OP" = "src"."_OP",
    "_VALID_TO" = "src"."_REPLICATOR_VALID_TO",
    "_IS_CURRENT" = "src"."_REPLICATOR_VALID_TO" IS NULL,
    "_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED THEN UPDATE SET
    "_VALID_TO" = "src"."_REPLICATOR_TS",
    "_IS_CURRENT" = FALSE;

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
