-- crm.customers -> MAIN.CUSTOMERS (duckdb)

-- transforms, evaluated by DuckDB over each change batch before staging (Spark SQL translated):
--   filter: kind <> 'test'
--     -> (CAST("kind" AS VARCHAR) <> 'test')
--   EMAIL: mask sha256 of the value's text (salted: the salt is a bind parameter, never printed)
--   CARD_NUMBER: mask redact, keeping the last 4
--   PHONE: mask the first 3 characters
--   BIRTH_DATE: mask NULL
--   FULL_NAME = concat_ws(' ', first_name, last_name)
--     -> concat_ws(' ', CAST("first_name" AS VARCHAR), CAST("last_name" AS VARCHAR))
--   TOTAL_WITH_TAX = round(net_amount * 1.2, 2)
--     -> CAST(round(CAST(CAST(CAST("net_amount" AS DECIMAL(12,2)) AS DECIMAL(12,2)) * CAST(CAST('1.2' AS DECIMAL(2,1)) AS DECIMAL(2,1)) AS DECIMAL(15,3)), 2) AS DECIMAL(15,2))
--   SIGNUP_MONTH = date_format(created_at, 'yyyy-MM')
--     -> strftime(CAST("created_at" AS TIMESTAMP), '%Y-%m')
--   EMAIL_DOMAIN = CASE WHEN email LIKE '%@%' THEN lower(regexp_replace(email, '^.*@', '')) END
--     -> CAST(CASE WHEN (CAST("email" AS VARCHAR) LIKE '%@%' ESCAPE '\') THEN CASE WHEN regexp_matches(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g'), '[İΣ]') THEN lower(replace(regexp_replace(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g'), '(\pL\pM*)Σ(\PL|$)', '\1ς\2', 'g'), 'İ', 'i̇')) ELSE lower(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g')) END ELSE NULL END AS VARCHAR)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `first_name`, `last_name`, `kind`, `email`, `card_number`, `phone`, CAST(`birth_date` AS CHAR) AS `birth_date`, CAST(`net_amount` AS CHAR) AS `net_amount`, CAST(`created_at` AS CHAR) AS `created_at` FROM `crm`.`customers`
--   (no filter is pushed down: no part of it is provably exact in MySQL, or a table reading the same source needs every row)

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "ID" BIGINT NOT NULL,
  "FIRST_NAME" VARCHAR,
  "LAST_NAME" VARCHAR,
  "KIND" VARCHAR,
  "EMAIL" VARCHAR,
  "CARD_NUMBER" VARCHAR,
  "PHONE" VARCHAR,
  "BIRTH_DATE" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "FULL_NAME" VARCHAR,
  "TOTAL_WITH_TAX" DECIMAL(14,2),
  "SIGNUP_MONTH" VARCHAR,
  "EMAIL_DOMAIN" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
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
SELECT * FROM "MAIN"."CUSTOMERS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_CUSTOMERS" (
  "ID" BIGINT,
  "FIRST_NAME" VARCHAR,
  "LAST_NAME" VARCHAR,
  "KIND" VARCHAR,
  "EMAIL" VARCHAR,
  "CARD_NUMBER" VARCHAR,
  "PHONE" VARCHAR,
  "BIRTH_DATE" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "FULL_NAME" VARCHAR,
  "TOTAL_WITH_TAX" DECIMAL(14,2),
  "SIGNUP_MONTH" VARCHAR,
  "EMAIL_DOMAIN" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_CUSTOMERS";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_CUSTOMERS" BY NAME
SELECT * FROM read_parquet(?);

-- merge staged changes
MERGE INTO "MAIN"."CUSTOMERS" AS "tgt"
USING (
  SELECT
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "FIRST_NAME" = "src"."FIRST_NAME",
    "LAST_NAME" = "src"."LAST_NAME",
    "KIND" = "src"."KIND",
    "EMAIL" = "src"."EMAIL",
    "CARD_NUMBER" = "src"."CARD_NUMBER",
    "PHONE" = "src"."PHONE",
    "BIRTH_DATE" = "src"."BIRTH_DATE",
    "CREATED_AT" = "src"."CREATED_AT",
    "FULL_NAME" = "src"."FULL_NAME",
    "TOTAL_WITH_TAX" = "src"."TOTAL_WITH_TAX",
    "SIGNUP_MONTH" = "src"."SIGNUP_MONTH",
    "EMAIL_DOMAIN" = "src"."EMAIL_DOMAIN",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS"
) VALUES (
    "src"."ID",
    "src"."FIRST_NAME",
    "src"."LAST_NAME",
    "src"."KIND",
    "src"."EMAIL",
    "src"."CARD_NUMBER",
    "src"."PHONE",
    "src"."BIRTH_DATE",
    "src"."CREATED_AT",
    "src"."FULL_NAME",
    "src"."TOTAL_WITH_TAX",
    "src"."SIGNUP_MONTH",
    "src"."EMAIL_DOMAIN",
    "src"."_OP",
    "src"."_TS_MS"
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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_CUSTOMERS" (
  "ID" BIGINT,
  "FIRST_NAME" VARCHAR,
  "LAST_NAME" VARCHAR,
  "KIND" VARCHAR,
  "EMAIL" VARCHAR,
  "CARD_NUMBER" VARCHAR,
  "PHONE" VARCHAR,
  "BIRTH_DATE" VARCHAR,
  "CREATED_AT" TIMESTAMP,
  "FULL_NAME" VARCHAR,
  "TOTAL_WITH_TAX" DECIMAL(14,2),
  "SIGNUP_MONTH" VARCHAR,
  "EMAIL_DOMAIN" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
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
  SELECT *, coalesce(((CAST("kind" AS VARCHAR) <> 'test')), FALSE) AS "__replicator_pass", (concat_ws(' ', CAST("first_name" AS VARCHAR), CAST("last_name" AS VARCHAR))) AS "__replicator_computed_0", (CAST(round(CAST(CAST(CAST("net_amount" AS DECIMAL(12,2)) AS DECIMAL(12,2)) * CAST(CAST('1.2' AS DECIMAL(2,1)) AS DECIMAL(2,1)) AS DECIMAL(15,3)), 2) AS DECIMAL(15,2))) AS "__replicator_computed_1", (strftime(CAST("created_at" AS TIMESTAMP), '%Y-%m')) AS "__replicator_computed_2", (CAST(CASE WHEN (CAST("email" AS VARCHAR) LIKE '%@%' ESCAPE '\') THEN CASE WHEN regexp_matches(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g'), '[İΣ]') THEN lower(replace(regexp_replace(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g'), '(\pL\pM*)Σ(\PL|$)', '\1ς\2', 'g'), 'İ', 'i̇')) ELSE lower(regexp_replace(CAST("email" AS VARCHAR), '^.*@', '', 'g')) END ELSE NULL END AS VARCHAR)) AS "__replicator_computed_3" FROM last
),
kept AS (
  SELECT *, CASE WHEN "__replicator_op" <> 'd' AND NOT "__replicator_pass" THEN 'd' ELSE "__replicator_op" END AS "__replicator_final_op" FROM judged
)
SELECT CAST("id" AS BIGINT) AS "ID", "first_name" AS "FIRST_NAME", "last_name" AS "LAST_NAME", "kind" AS "KIND", sha256((?::VARCHAR || "email")) AS "EMAIL", CASE WHEN length("card_number") <= 4 THEN repeat('*', length("card_number")) ELSE repeat('*', length("card_number") - 4) || right("card_number", 4) END AS "CARD_NUMBER", substring("phone", 1, 3) AS "PHONE", NULL AS "BIRTH_DATE", CAST("created_at" AS TIMESTAMP) AS "CREATED_AT", "__replicator_computed_0" AS "FULL_NAME", CAST(round_even("__replicator_computed_1", 2) AS DECIMAL(14,2)) AS "TOTAL_WITH_TAX", "__replicator_computed_2" AS "SIGNUP_MONTH", "__replicator_computed_3" AS "EMAIL_DOMAIN", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

-- merge staged changes
MERGE INTO "MAIN"."CUSTOMERS" AS "tgt"
USING (
  SELECT
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "FIRST_NAME" = "src"."FIRST_NAME",
    "LAST_NAME" = "src"."LAST_NAME",
    "KIND" = "src"."KIND",
    "EMAIL" = "src"."EMAIL",
    "CARD_NUMBER" = "src"."CARD_NUMBER",
    "PHONE" = "src"."PHONE",
    "BIRTH_DATE" = "src"."BIRTH_DATE",
    "CREATED_AT" = "src"."CREATED_AT",
    "FULL_NAME" = "src"."FULL_NAME",
    "TOTAL_WITH_TAX" = "src"."TOTAL_WITH_TAX",
    "SIGNUP_MONTH" = "src"."SIGNUP_MONTH",
    "EMAIL_DOMAIN" = "src"."EMAIL_DOMAIN",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS"
) VALUES (
    "src"."ID",
    "src"."FIRST_NAME",
    "src"."LAST_NAME",
    "src"."KIND",
    "src"."EMAIL",
    "src"."CARD_NUMBER",
    "src"."PHONE",
    "src"."BIRTH_DATE",
    "src"."CREATED_AT",
    "src"."FULL_NAME",
    "src"."TOTAL_WITH_TAX",
    "src"."SIGNUP_MONTH",
    "src"."EMAIL_DOMAIN",
    "src"."_OP",
    "src"."_TS_MS"
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "MAIN"."CUSTOMERS" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "MAIN"."CUSTOMERS" (
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS"
)
SELECT
    "src"."ID",
    "src"."FIRST_NAME",
    "src"."LAST_NAME",
    "src"."KIND",
    "src"."EMAIL",
    "src"."CARD_NUMBER",
    "src"."PHONE",
    "src"."BIRTH_DATE",
    "src"."CREATED_AT",
    "src"."FULL_NAME",
    "src"."TOTAL_WITH_TAX",
    "src"."SIGNUP_MONTH",
    "src"."EMAIL_DOMAIN",
    "src"."_OP",
    "src"."_TS_MS"
FROM (
  SELECT
    "ID",
    "FIRST_NAME",
    "LAST_NAME",
    "KIND",
    "EMAIL",
    "CARD_NUMBER",
    "PHONE",
    "BIRTH_DATE",
    "CREATED_AT",
    "FULL_NAME",
    "TOTAL_WITH_TAX",
    "SIGNUP_MONTH",
    "EMAIL_DOMAIN",
    "_OP",
    "_TS_MS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
