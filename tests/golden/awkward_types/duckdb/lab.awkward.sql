-- lab.awkward -> main.awkward (duckdb)

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

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_awkward" (
  "id" DECIMAL(20,0),
  "amount" DECIMAL(38,10),
  "happened_at" TIMESTAMP,
  "recorded_at" TIMESTAMPTZ,
  "duration" VARCHAR,
  "big_counter" DECIMAL(20,0),
  "payload" VARCHAR,
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
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" BIGINT,
  "_REPLICATOR_TS" TIMESTAMPTZ
);

-- skip a batch already applied
SELECT 1 FROM "main"."_REPLICATOR_STATE" WHERE "pipeline" = ? AND "table" = ? AND "batch_id" = ?;

-- clear staging
DELETE FROM "_REPLICATOR_STAGE_awkward";

-- merge staged changes
MERGE INTO "main"."awkward" AS "tgt"
USING (
  SELECT
    "id",
    "amount",
    "happened_at",
    "recorded_at",
    "duration",
    "big_counter",
    CAST("payload" AS JSON) AS "payload",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_awkward"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "id" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
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
