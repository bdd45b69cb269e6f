-- shop.customers -> MAIN.CUSTOMERS (snowflake)

-- transforms, evaluated by DuckDB over each change batch before staging (Spark SQL translated):
--   EMAIL: mask sha256 of the value's text

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `name`, `email`, `tier`, `city` FROM `shop`.`customers`

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "ID" NUMBER(10,0) NOT NULL,
  "NAME" VARCHAR,
  "EMAIL" VARCHAR,
  "TIER" VARCHAR,
  "CITY" VARCHAR,
  "_OP" VARCHAR,
  "_VALID_FROM" TIMESTAMP_TZ(6) NOT NULL,
  "_VALID_TO" TIMESTAMP_TZ(6),
  "_IS_CURRENT" BOOLEAN NOT NULL,
  "_CHANGE_SEQ" VARCHAR NOT NULL
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
  "ID" NUMBER(10,0),
  "NAME" VARCHAR,
  "EMAIL" VARCHAR,
  "TIER" VARCHAR,
  "CITY" VARCHAR,
  "_OP" VARCHAR,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6),
  "_REPLICATOR_VALID_TO" TIMESTAMP_TZ(6),
  "_REPLICATOR_CHANGE_SEQ" VARCHAR
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."CUSTOMERS" LIMIT 0;

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

-- drop versions already applied
DELETE FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
WHERE EXISTS (
  SELECT 1 FROM "MAIN"."CUSTOMERS" AS "tgt"
  WHERE "tgt"."ID" = "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"."ID"
    AND "tgt"."_CHANGE_SEQ" >= "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"."_REPLICATOR_CHANGE_SEQ"
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
  FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd'
  AND NOT (
    "src"."_REPLICATOR_SEQ" = (SELECT MIN("s2"."_REPLICATOR_SEQ") FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS" AS "s2" WHERE "s2"."ID" = "src"."ID")
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
  FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ") = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
  AND "tgt"."_IS_CURRENT"
  AND "tgt"."_CHANGE_SEQ" < "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "tgt"."_VALID_TO" = "src"."_REPLICATOR_TS",
    "tgt"."_IS_CURRENT" = FALSE,
    "tgt"."_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED AND "tgt"."TIER" IS NOT DISTINCT FROM "src"."TIER" AND "tgt"."CITY" IS NOT DISTINCT FROM "src"."CITY" THEN UPDATE SET
    "tgt"."NAME" = "src"."NAME",
    "tgt"."EMAIL" = "src"."EMAIL",
    "tgt"."TIER" = "src"."TIER",
    "tgt"."CITY" = "src"."CITY",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_VALID_TO" = "src"."_REPLICATOR_VALID_TO",
    "tgt"."_IS_CURRENT" = "src"."_REPLICATOR_VALID_TO" IS NULL,
    "tgt"."_CHANGE_SEQ" = "src"."_REPLICATOR_CHANGE_SEQ"
WHEN MATCHED THEN UPDATE SET
    "tgt"."_VALID_TO" = "src"."_REPLICATOR_TS",
    "tgt"."_IS_CURRENT" = FALSE;

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
