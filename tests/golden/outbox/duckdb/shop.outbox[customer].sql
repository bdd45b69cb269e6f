-- shop.outbox[customer] -> MAIN.CUSTOMERS (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `aggregate_type`, `aggregate_id`, `payload` FROM `shop`.`outbox`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."CUSTOMERS" (
  "CUSTOMER_ID" DECIMAL(20,0) NOT NULL,
  "EMAIL" VARCHAR,
  "VIP" BOOLEAN,
  "SIGNED_UP" DATE,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_SYNCED_AT" TIMESTAMPTZ,
  "_DELETED" BOOLEAN,
  "_DELETED_AT" TIMESTAMPTZ,
  PRIMARY KEY ("CUSTOMER_ID")
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
  "CUSTOMER_ID" DECIMAL(20,0),
  "EMAIL" VARCHAR,
  "VIP" BOOLEAN,
  "SIGNED_UP" DATE,
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
    "CUSTOMER_ID",
    "EMAIL",
    "VIP",
    "SIGNED_UP",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_CUSTOMERS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "CUSTOMER_ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."CUSTOMER_ID" = "src"."CUSTOMER_ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN UPDATE SET
    "_DELETED" = TRUE,
    "_DELETED_AT" = "src"."_REPLICATOR_TS",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN MATCHED THEN UPDATE SET
    "EMAIL" = "src"."EMAIL",
    "VIP" = "src"."VIP",
    "SIGNED_UP" = "src"."SIGNED_UP",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT",
    "_DELETED" = FALSE,
    "_DELETED_AT" = NULL
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;
