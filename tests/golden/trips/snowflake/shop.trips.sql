-- shop.trips -> ANALYTICS.RAW.DRIVER_TRIPS (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `TRIPID`, `DRIVERID`, CAST(`TIMECOMPLETED` AS CHAR) AS `TIMECOMPLETED` FROM `shop`.`trips`

-- create target table
CREATE TABLE IF NOT EXISTS "ANALYTICS"."RAW"."DRIVER_TRIPS" (
  "TRIPID" NUMBER(10,0) NOT NULL,
  "DRIVER_ID" VARCHAR,
  "TIMECOMPLETED" TIMESTAMP_TZ(0),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_SYNCED_AT" TIMESTAMP_TZ(6),
  PRIMARY KEY ("TRIPID")
);

-- create state table
CREATE TABLE IF NOT EXISTS "ANALYTICS"."RAW"."_REPLICATOR_STATE" (
  "PIPELINE" VARCHAR NOT NULL,
  "TABLE" VARCHAR NOT NULL,
  "BATCH_ID" NUMBER(19,0) NOT NULL,
  "END_OFFSET" VARCHAR,
  "APPLIED_AT" TIMESTAMP_TZ(6) NOT NULL,
  PRIMARY KEY ("PIPELINE", "TABLE", "BATCH_ID")
);

-- create staging table
CREATE TRANSIENT TABLE IF NOT EXISTS "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS" (
  "TRIPID" NUMBER(10,0),
  "DRIVER_ID" VARCHAR,
  "TIMECOMPLETED" TIMESTAMP_TZ(0),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "ANALYTICS"."RAW"."DRIVER_TRIPS" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "ANALYTICS"."RAW"."DRIVER_TRIPS";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "ANALYTICS"."RAW"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"ANALYTICS"."RAW".%_REPLICATOR_STAGE_DRIVER_TRIPS/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS"
  FROM @"ANALYTICS"."RAW".%_REPLICATOR_STAGE_DRIVER_TRIPS/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

-- merge staged changes
MERGE INTO "ANALYTICS"."RAW"."DRIVER_TRIPS" AS "tgt"
USING (
  SELECT
    "TRIPID",
    "DRIVER_ID",
    "TIMECOMPLETED",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "TRIPID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."TRIPID" = "src"."TRIPID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."DRIVER_ID" = "src"."DRIVER_ID",
    "tgt"."TIMECOMPLETED" = "src"."TIMECOMPLETED",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "TRIPID",
    "DRIVER_ID",
    "TIMECOMPLETED",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
) VALUES (
    "src"."TRIPID",
    "src"."DRIVER_ID",
    "src"."TIMECOMPLETED",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
);

-- record the batch
INSERT INTO "ANALYTICS"."RAW"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "ANALYTICS"."RAW"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "ANALYTICS"."RAW"."DRIVER_TRIPS" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "ANALYTICS"."RAW"."DRIVER_TRIPS" (
    "TRIPID",
    "DRIVER_ID",
    "TIMECOMPLETED",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
)
SELECT
    "src"."TRIPID",
    "src"."DRIVER_ID",
    "src"."TIMECOMPLETED",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
FROM (
  SELECT
    "TRIPID",
    "DRIVER_ID",
    "TIMECOMPLETED",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "ANALYTICS"."RAW"."_REPLICATOR_STAGE_DRIVER_TRIPS"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "TRIPID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "ANALYTICS"."RAW"."DRIVER_TRIPS" WHERE "_SYNCED_AT" < (SELECT "APPLIED_AT" FROM "ANALYTICS"."RAW"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?);
