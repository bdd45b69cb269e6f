-- lab.awkward -> main.awkward (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, CAST(`amount` AS CHAR) AS `amount`, CAST(`happened_at` AS CHAR) AS `happened_at`, CAST(`recorded_at` AS CHAR) AS `recorded_at`, CAST(`duration` AS CHAR) AS `duration`, `big_counter`, `payload`, `raw_bytes`, `mood`, `tags`, CAST(`flag` AS UNSIGNED) AS `flag`, CAST(`flags8` AS UNSIGNED) AS `flags8`, `model_year`, `is_active`, CAST(`ratio_f` AS DOUBLE) AS `ratio_f`, `ratio_d`, `title`, `first name`, `order` FROM `lab`.`awkward`

-- create target table
CREATE TABLE IF NOT EXISTS "main"."awkward" (
  "id" NUMBER(20,0) NOT NULL,
  "amount" NUMBER(38,10),
  "happened_at" TIMESTAMP_NTZ(6),
  "recorded_at" TIMESTAMP_TZ(6),
  "duration" VARCHAR,
  "big_counter" NUMBER(20,0),
  "payload" VARIANT,
  "raw_bytes" BINARY,
  "mood" VARCHAR,
  "tags" VARCHAR,
  "flag" BOOLEAN,
  "flags8" BINARY,
  "model_year" NUMBER(4,0),
  "is_active" BOOLEAN,
  "ratio_f" FLOAT,
  "ratio_d" FLOAT,
  "title" VARCHAR,
  "first name" VARCHAR,
  "order" NUMBER(10,0),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_SYNCED_AT" TIMESTAMP_TZ(6),
  PRIMARY KEY ("id")
);

-- create state table
CREATE TABLE IF NOT EXISTS "main"."_REPLICATOR_STATE" (
  "pipeline" VARCHAR NOT NULL,
  "table" VARCHAR NOT NULL,
  "batch_id" NUMBER(19,0) NOT NULL,
  "end_offset" VARCHAR,
  "applied_at" TIMESTAMP_TZ(6) NOT NULL,
  PRIMARY KEY ("pipeline", "table", "batch_id")
);

-- create staging table
CREATE TRANSIENT TABLE IF NOT EXISTS "main"."_REPLICATOR_STAGE_AWKWARD" (
  "_REPLICATOR_COL_1" NUMBER(20,0),
  "_REPLICATOR_COL_2" NUMBER(38,10),
  "_REPLICATOR_COL_3" TIMESTAMP_NTZ(6),
  "_REPLICATOR_COL_4" TIMESTAMP_TZ(6),
  "_REPLICATOR_COL_5" VARCHAR,
  "_REPLICATOR_COL_6" NUMBER(20,0),
  "_REPLICATOR_COL_7" VARCHAR,
  "_REPLICATOR_COL_8" BINARY,
  "_REPLICATOR_COL_9" VARCHAR,
  "_REPLICATOR_COL_10" VARCHAR,
  "_REPLICATOR_COL_11" BOOLEAN,
  "_REPLICATOR_COL_12" BINARY,
  "_REPLICATOR_COL_13" NUMBER(4,0),
  "_REPLICATOR_COL_14" BOOLEAN,
  "_REPLICATOR_COL_15" FLOAT,
  "_REPLICATOR_COL_16" FLOAT,
  "_REPLICATOR_COL_17" VARCHAR,
  "_REPLICATOR_COL_18" VARCHAR,
  "_REPLICATOR_COL_19" NUMBER(10,0),
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "main"."awkward" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "main"."awkward";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "main"."_REPLICATOR_STAGE_AWKWARD" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?;

-- clear staging
DELETE FROM "main"."_REPLICATOR_STAGE_AWKWARD";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"main".%_REPLICATOR_STAGE_AWKWARD/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "main"."_REPLICATOR_STAGE_AWKWARD"
  FROM @"main".%_REPLICATOR_STAGE_AWKWARD/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

-- merge staged changes
MERGE INTO "main"."awkward" AS "tgt"
USING (
  SELECT
    "_REPLICATOR_COL_1" AS "id",
    "_REPLICATOR_COL_2" AS "amount",
    "_REPLICATOR_COL_3" AS "happened_at",
    "_REPLICATOR_COL_4" AS "recorded_at",
    "_REPLICATOR_COL_5" AS "duration",
    "_REPLICATOR_COL_6" AS "big_counter",
    PARSE_JSON("_REPLICATOR_COL_7") AS "payload",
    "_REPLICATOR_COL_8" AS "raw_bytes",
    "_REPLICATOR_COL_9" AS "mood",
    "_REPLICATOR_COL_10" AS "tags",
    "_REPLICATOR_COL_11" AS "flag",
    "_REPLICATOR_COL_12" AS "flags8",
    "_REPLICATOR_COL_13" AS "model_year",
    "_REPLICATOR_COL_14" AS "is_active",
    "_REPLICATOR_COL_15" AS "ratio_f",
    "_REPLICATOR_COL_16" AS "ratio_d",
    "_REPLICATOR_COL_17" AS "title",
    "_REPLICATOR_COL_18" AS "first name",
    "_REPLICATOR_COL_19" AS "order",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "main"."_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_REPLICATOR_COL_1" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."id" = "src"."id"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."amount" = "src"."amount",
    "tgt"."happened_at" = "src"."happened_at",
    "tgt"."recorded_at" = "src"."recorded_at",
    "tgt"."duration" = "src"."duration",
    "tgt"."big_counter" = "src"."big_counter",
    "tgt"."payload" = "src"."payload",
    "tgt"."raw_bytes" = "src"."raw_bytes",
    "tgt"."mood" = "src"."mood",
    "tgt"."tags" = "src"."tags",
    "tgt"."flag" = "src"."flag",
    "tgt"."flags8" = "src"."flags8",
    "tgt"."model_year" = "src"."model_year",
    "tgt"."is_active" = "src"."is_active",
    "tgt"."ratio_f" = "src"."ratio_f",
    "tgt"."ratio_d" = "src"."ratio_d",
    "tgt"."title" = "src"."title",
    "tgt"."first name" = "src"."first name",
    "tgt"."order" = "src"."order",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_SYNCED_AT" = "src"."_SYNCED_AT"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "id",
    "amount",
    "happened_at",
    "recorded_at",
    "duration",
    "big_counter",
    "payload",
    "raw_bytes",
    "mood",
    "tags",
    "flag",
    "flags8",
    "model_year",
    "is_active",
    "ratio_f",
    "ratio_d",
    "title",
    "first name",
    "order",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
) VALUES (
    "src"."id",
    "src"."amount",
    "src"."happened_at",
    "src"."recorded_at",
    "src"."duration",
    "src"."big_counter",
    "src"."payload",
    "src"."raw_bytes",
    "src"."mood",
    "src"."tags",
    "src"."flag",
    "src"."flags8",
    "src"."model_year",
    "src"."is_active",
    "src"."ratio_f",
    "src"."ratio_d",
    "src"."title",
    "src"."first name",
    "src"."order",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
);

-- record the batch
INSERT INTO "main"."_REPLICATOR_STATE" ("pipeline", "table", "batch_id", "end_offset", "applied_at") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "main"."_REPLICATOR_STATE_LEASE" SET "renewed_at" = CURRENT_TIMESTAMP WHERE "pipeline" = ? AND "generation" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "main"."awkward" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "main"."awkward" (
    "id",
    "amount",
    "happened_at",
    "recorded_at",
    "duration",
    "big_counter",
    "payload",
    "raw_bytes",
    "mood",
    "tags",
    "flag",
    "flags8",
    "model_year",
    "is_active",
    "ratio_f",
    "ratio_d",
    "title",
    "first name",
    "order",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT"
)
SELECT
    "src"."id",
    "src"."amount",
    "src"."happened_at",
    "src"."recorded_at",
    "src"."duration",
    "src"."big_counter",
    "src"."payload",
    "src"."raw_bytes",
    "src"."mood",
    "src"."tags",
    "src"."flag",
    "src"."flags8",
    "src"."model_year",
    "src"."is_active",
    "src"."ratio_f",
    "src"."ratio_d",
    "src"."title",
    "src"."first name",
    "src"."order",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT"
FROM (
  SELECT
    "_REPLICATOR_COL_1" AS "id",
    "_REPLICATOR_COL_2" AS "amount",
    "_REPLICATOR_COL_3" AS "happened_at",
    "_REPLICATOR_COL_4" AS "recorded_at",
    "_REPLICATOR_COL_5" AS "duration",
    "_REPLICATOR_COL_6" AS "big_counter",
    PARSE_JSON("_REPLICATOR_COL_7") AS "payload",
    "_REPLICATOR_COL_8" AS "raw_bytes",
    "_REPLICATOR_COL_9" AS "mood",
    "_REPLICATOR_COL_10" AS "tags",
    "_REPLICATOR_COL_11" AS "flag",
    "_REPLICATOR_COL_12" AS "flags8",
    "_REPLICATOR_COL_13" AS "model_year",
    "_REPLICATOR_COL_14" AS "is_active",
    "_REPLICATOR_COL_15" AS "ratio_f",
    "_REPLICATOR_COL_16" AS "ratio_d",
    "_REPLICATOR_COL_17" AS "title",
    "_REPLICATOR_COL_18" AS "first name",
    "_REPLICATOR_COL_19" AS "order",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "main"."_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_REPLICATOR_COL_1" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "main"."awkward" WHERE "_SYNCED_AT" < (SELECT "applied_at" FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?);
