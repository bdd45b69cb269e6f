-- crm.customers -> MAIN.CUSTOMERS (snowflake)

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

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "ID" NUMBER(19,0) NOT NULL,
  "FIRST_NAME" VARCHAR,
  "LAST_NAME" VARCHAR,
  "KIND" VARCHAR,
  "EMAIL" VARCHAR,
  "CARD_NUMBER" VARCHAR,
  "PHONE" VARCHAR,
  "BIRTH_DATE" VARCHAR,
  "CREATED_AT" TIMESTAMP_NTZ(6),
  "FULL_NAME" VARCHAR,
  "TOTAL_WITH_TAX" NUMBER(14,2),
  "SIGNUP_MONTH" VARCHAR,
  "EMAIL_DOMAIN" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  PRIMARY KEY ("ID")
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
CREATE TRANSIENT TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STAGE_CUSTOMERS" (
  "ID" NUMBER(19,0),
  "FIRST_NAME" VARCHAR,
  "LAST_NAME" VARCHAR,
  "KIND" VARCHAR,
  "EMAIL" VARCHAR,
  "CARD_NUMBER" VARCHAR,
  "PHONE" VARCHAR,
  "BIRTH_DATE" VARCHAR,
  "CREATED_AT" TIMESTAMP_NTZ(6),
  "FULL_NAME" VARCHAR,
  "TOTAL_WITH_TAX" NUMBER(14,2),
  "SIGNUP_MONTH" VARCHAR,
  "EMAIL_DOMAIN" VARCHAR,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."CUSTOMERS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "MAIN"."CUSTOMERS";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"MAIN".%_REPLICATOR_STAGE_CUSTOMERS/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
  FROM @"MAIN".%_REPLICATOR_STAGE_CUSTOMERS/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

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
  FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."FIRST_NAME" = "src"."FIRST_NAME",
    "tgt"."LAST_NAME" = "src"."LAST_NAME",
    "tgt"."KIND" = "src"."KIND",
    "tgt"."EMAIL" = "src"."EMAIL",
    "tgt"."CARD_NUMBER" = "src"."CARD_NUMBER",
    "tgt"."PHONE" = "src"."PHONE",
    "tgt"."BIRTH_DATE" = "src"."BIRTH_DATE",
    "tgt"."CREATED_AT" = "src"."CREATED_AT",
    "tgt"."FULL_NAME" = "src"."FULL_NAME",
    "tgt"."TOTAL_WITH_TAX" = "src"."TOTAL_WITH_TAX",
    "tgt"."SIGNUP_MONTH" = "src"."SIGNUP_MONTH",
    "tgt"."EMAIL_DOMAIN" = "src"."EMAIL_DOMAIN",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS"
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

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
  FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';
