-- shop.outbox[customer] -> MAIN.CUSTOMERS (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `aggregate_type`, `aggregate_id`, `payload` FROM `shop`.`outbox`

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "CUSTOMER_ID" NUMBER(20,0) NOT NULL,
  "EMAIL" VARCHAR,
  "VIP" BOOLEAN,
  "SIGNED_UP" DATE,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_SYNCED_AT" TIMESTAMP_TZ(6),
  "_DELETED" BOOLEAN,
  "_DELETED_AT" TIMESTAMP_TZ(6),
  PRIMARY KEY ("CUSTOMER_ID")
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
  "CUSTOMER_ID" NUMBER(20,0),
  "EMAIL" VARCHAR,
  "VIP" BOOLEAN,
  "SIGNED_UP" DATE,
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
    "CUSTOMER_ID",
    "EMAIL",
    "VIP",
    "SIGNED_UP",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "MAIN"."_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "CUSTOMER_ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."CUSTOMER_ID" = "src"."CUSTOMER_ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "tgt"."_DELETED" = TRUE,
    "tgt"."_DELETED_AT" = "src"."_REPLICATOR_TS",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN MATCHED THEN UPDATE SET
    "tgt"."EMAIL" = "src"."EMAIL",
    "tgt"."VIP" = "src"."VIP",
    "tgt"."SIGNED_UP" = "src"."SIGNED_UP",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_SYNCED_AT" = "src"."_SYNCED_AT",
    "tgt"."_DELETED" = FALSE,
    "tgt"."_DELETED_AT" = NULL
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "CUSTOMER_ID",
    "EMAIL",
    "VIP",
    "SIGNED_UP",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_DELETED",
    "_DELETED_AT"
) VALUES (
    "src"."CUSTOMER_ID",
    "src"."EMAIL",
    "src"."VIP",
    "src"."SIGNED_UP",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
    FALSE,
    NULL
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
