-- lab.awkward -> main.awkward (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, CAST(`amount` AS CHAR) AS `amount`, CAST(`happened_at` AS CHAR) AS `happened_at`, CAST(`recorded_at` AS CHAR) AS `recorded_at`, CAST(`duration` AS CHAR) AS `duration`, `big_counter`, `payload`, `raw_bytes`, `mood`, `tags`, CAST(`flag` AS UNSIGNED) AS `flag`, CAST(`flags8` AS UNSIGNED) AS `flags8`, `model_year`, `is_active`, CAST(`ratio_f` AS DOUBLE) AS `ratio_f`, `ratio_d`, `title`, `first name`, `order` FROM `lab`.`awkward`

-- create schema
CREATE SCHEMA IF NOT EXISTS "main";

-- create target table
CREATE TABLE IF NOT EXISTS "main"."awkward" (
  "id" DECIMAL(20,0) NOT NULL,
  "amount" DECIMAL(38,10),
  "happened_at" TIMESTAMP,
  "recorded_at" TIMESTAMPTZ,
  "duration" VARCHAR,
  "big_counter" DECIMAL(20,0),
  "payload" JSON,
  "raw_bytes" BLOB,
  "mood" VARCHAR,
  "tags" VARCHAR,
  "flag" BOOLEAN,
  "flags8" BLOB,
  "model_year" SMALLINT,
  "is_active" BOOLEAN,
  "ratio_f" DOUBLE,
  "ratio_d" DOUBLE,
  "title" VARCHAR,
  "first name" VARCHAR,
  "order" INTEGER,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_SYNCED_AT" TIMESTAMPTZ,
  PRIMARY KEY ("id")
);

-- create state table
CREATE TABLE IF NOT EXISTS "main"."_REPLICATOR_STATE" (
  "pipeline" VARCHAR NOT NULL,
  "table" VARCHAR NOT NULL,
  "batch_id" BIGINT NOT NULL,
  "end_offset" VARCHAR,
  "applied_at" TIMESTAMPTZ NOT NULL,
  PRIMARY KEY ("pipeline", "table", "batch_id")
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "main"."awkward" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_AWKWARD" (
  "_REPLICATOR_COL_1" DECIMAL(20,0),
  "_REPLICATOR_COL_2" DECIMAL(38,10),
  "_REPLICATOR_COL_3" TIMESTAMP,
  "_REPLICATOR_COL_4" TIMESTAMPTZ,
  "_REPLICATOR_COL_5" VARCHAR,
  "_REPLICATOR_COL_6" DECIMAL(20,0),
  "_REPLICATOR_COL_7" VARCHAR,
  "_REPLICATOR_COL_8" BLOB,
  "_REPLICATOR_COL_9" VARCHAR,
  "_REPLICATOR_COL_10" VARCHAR,
  "_REPLICATOR_COL_11" BOOLEAN,
  "_REPLICATOR_COL_12" BLOB,
  "_REPLICATOR_COL_13" SMALLINT,
  "_REPLICATOR_COL_14" BOOLEAN,
  "_REPLICATOR_COL_15" DOUBLE,
  "_REPLICATOR_COL_16" DOUBLE,
  "_REPLICATOR_COL_17" VARCHAR,
  "_REPLICATOR_COL_18" VARCHAR,
  "_REPLICATOR_COL_19" INTEGER,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_AWKWARD";

-- load staging from the batch's Parquet files
INSERT INTO "_REPLICATOR_STAGE_AWKWARD" BY NAME
SELECT * FROM read_parquet(?);

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
    CAST("_REPLICATOR_COL_7" AS JSON) AS "payload",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_REPLICATOR_COL_1" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."id" = "src"."id"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "amount" = "src"."amount",
    "happened_at" = "src"."happened_at",
    "recorded_at" = "src"."recorded_at",
    "duration" = "src"."duration",
    "big_counter" = "src"."big_counter",
    "payload" = "src"."payload",
    "raw_bytes" = "src"."raw_bytes",
    "mood" = "src"."mood",
    "tags" = "src"."tags",
    "flag" = "src"."flag",
    "flags8" = "src"."flags8",
    "model_year" = "src"."model_year",
    "is_active" = "src"."is_active",
    "ratio_f" = "src"."ratio_f",
    "ratio_d" = "src"."ratio_d",
    "title" = "src"."title",
    "first name" = "src"."first name",
    "order" = "src"."order",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
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
INSERT INTO "main"."_REPLICATOR_STATE" ("pipeline", "table", "batch_id", "end_offset", "applied_at") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "main"."_REPLICATOR_STATE_LEASE" SET "renewed_at" = CURRENT_TIMESTAMP WHERE "pipeline" = ? AND "generation" = ?;

-- commit the batch
COMMIT;

-- each snapshot batch (a group of chunk files; the warehouse runs the transform step over them):

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_AWKWARD" (
  "_REPLICATOR_COL_1" DECIMAL(20,0),
  "_REPLICATOR_COL_2" DECIMAL(38,10),
  "_REPLICATOR_COL_3" TIMESTAMP,
  "_REPLICATOR_COL_4" TIMESTAMPTZ,
  "_REPLICATOR_COL_5" VARCHAR,
  "_REPLICATOR_COL_6" DECIMAL(20,0),
  "_REPLICATOR_COL_7" VARCHAR,
  "_REPLICATOR_COL_8" BLOB,
  "_REPLICATOR_COL_9" VARCHAR,
  "_REPLICATOR_COL_10" VARCHAR,
  "_REPLICATOR_COL_11" BOOLEAN,
  "_REPLICATOR_COL_12" BLOB,
  "_REPLICATOR_COL_13" SMALLINT,
  "_REPLICATOR_COL_14" BOOLEAN,
  "_REPLICATOR_COL_15" DOUBLE,
  "_REPLICATOR_COL_16" DOUBLE,
  "_REPLICATOR_COL_17" VARCHAR,
  "_REPLICATOR_COL_18" VARCHAR,
  "_REPLICATOR_COL_19" INTEGER,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_AWKWARD";

-- read instants in UTC, as the transform step assumes
SET TimeZone = 'UTC';

-- stage the batch's change files: the transform step, run by the warehouse
INSERT INTO "_REPLICATOR_STAGE_AWKWARD" BY NAME
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
SELECT CAST("id" AS DECIMAL(20,0)) AS "_REPLICATOR_COL_1", CAST(round_even("amount", 10) AS DECIMAL(38,10)) AS "_REPLICATOR_COL_2", CAST("happened_at" AS TIMESTAMP) AS "_REPLICATOR_COL_3", CAST("recorded_at" AS TIMESTAMPTZ) AS "_REPLICATOR_COL_4", "duration" AS "_REPLICATOR_COL_5", CAST("big_counter" AS DECIMAL(20,0)) AS "_REPLICATOR_COL_6", "payload" AS "_REPLICATOR_COL_7", "raw_bytes" AS "_REPLICATOR_COL_8", "mood" AS "_REPLICATOR_COL_9", "tags" AS "_REPLICATOR_COL_10", ("flag" <> 0) AS "_REPLICATOR_COL_11", unhex(lpad(to_hex(CAST("flags8" AS UBIGINT)), 2, '0')) AS "_REPLICATOR_COL_12", CAST("model_year" AS SMALLINT) AS "_REPLICATOR_COL_13", ("is_active" <> 0) AS "_REPLICATOR_COL_14", CAST("ratio_f" AS DOUBLE) AS "_REPLICATOR_COL_15", CAST("ratio_d" AS DOUBLE) AS "_REPLICATOR_COL_16", "title" AS "_REPLICATOR_COL_17", "first name" AS "_REPLICATOR_COL_18", CAST("order" AS INTEGER) AS "_REPLICATOR_COL_19", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

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
    CAST("_REPLICATOR_COL_7" AS JSON) AS "payload",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_REPLICATOR_COL_1" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."id" = "src"."id"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "amount" = "src"."amount",
    "happened_at" = "src"."happened_at",
    "recorded_at" = "src"."recorded_at",
    "duration" = "src"."duration",
    "big_counter" = "src"."big_counter",
    "payload" = "src"."payload",
    "raw_bytes" = "src"."raw_bytes",
    "mood" = "src"."mood",
    "tags" = "src"."tags",
    "flag" = "src"."flag",
    "flags8" = "src"."flags8",
    "model_year" = "src"."model_year",
    "is_active" = "src"."is_active",
    "ratio_f" = "src"."ratio_f",
    "ratio_d" = "src"."ratio_d",
    "title" = "src"."title",
    "first name" = "src"."first name",
    "order" = "src"."order",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT"
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
INSERT INTO "main"."_REPLICATOR_STATE" ("pipeline", "table", "batch_id", "end_offset", "applied_at") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

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
    CAST("_REPLICATOR_COL_7" AS JSON) AS "payload",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "_REPLICATOR_COL_1" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "main"."awkward" WHERE "_SYNCED_AT" < (SELECT "applied_at" FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?);
