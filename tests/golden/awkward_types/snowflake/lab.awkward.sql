-- lab.awkward -> main.awkward (snowflake)

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
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_awkward" (
  "id" NUMBER(20,0),
  "amount" NUMBER(38,10),
  "happened_at" TIMESTAMP_NTZ(6),
  "recorded_at" TIMESTAMP_TZ(6),
  "duration" VARCHAR,
  "big_counter" NUMBER(20,0),
  "payload" VARCHAR,
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
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
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
    PARSE_JSON("payload") AS "payload",
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
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_awkward"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "id" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
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
