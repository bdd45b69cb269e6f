-- demo.awkward -> MAIN.AWKWARD (snowflake)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `title`, `note`, CAST(`amount` AS CHAR) AS `amount`, CAST(`happened_at` AS CHAR) AS `happened_at`, CAST(`recorded_at` AS CHAR) AS `recorded_at`, CAST(`duration` AS CHAR) AS `duration`, `big`, `payload`, `raw`, `mood`, `tags`, CAST(`flag` AS UNSIGNED) AS `flag`, CAST(`flags8` AS UNSIGNED) AS `flags8`, `is_active`, CAST(`born` AS CHAR) AS `born`, `model_year`, `ratio` FROM `demo`.`awkward`

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."AWKWARD" (
  "ID" NUMBER(20,0) NOT NULL,
  "TITLE" VARCHAR,
  "NOTE" VARCHAR,
  "AMOUNT" NUMBER(38,10),
  "HAPPENED_AT" TIMESTAMP_NTZ(6),
  "RECORDED_AT" TIMESTAMP_TZ(6),
  "DURATION" VARCHAR,
  "BIG" NUMBER(20,0),
  "PAYLOAD" VARIANT,
  "RAW" BINARY,
  "MOOD" VARCHAR,
  "TAGS" VARCHAR,
  "FLAG" BOOLEAN,
  "FLAGS8" BINARY,
  "IS_ACTIVE" BOOLEAN,
  "BORN" DATE,
  "MODEL_YEAR" NUMBER(4,0),
  "RATIO" FLOAT,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_SYNCED_AT" TIMESTAMP_TZ(6),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
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
CREATE TRANSIENT TABLE IF NOT EXISTS "MAIN"."_REPLICATOR_STAGE_AWKWARD" (
  "ID" NUMBER(20,0),
  "TITLE" VARCHAR,
  "NOTE" VARCHAR,
  "AMOUNT" NUMBER(38,10),
  "HAPPENED_AT" TIMESTAMP_NTZ(6),
  "RECORDED_AT" TIMESTAMP_TZ(6),
  "DURATION" VARCHAR,
  "BIG" NUMBER(20,0),
  "PAYLOAD" VARCHAR,
  "RAW" BINARY,
  "MOOD" VARCHAR,
  "TAGS" VARCHAR,
  "FLAG" BOOLEAN,
  "FLAGS8" BINARY,
  "IS_ACTIVE" BOOLEAN,
  "BORN" DATE,
  "MODEL_YEAR" NUMBER(4,0),
  "RATIO" FLOAT,
  "_OP" VARCHAR,
  "_TS_MS" NUMBER(19,0),
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" NUMBER(19,0),
  "_REPLICATOR_OP" VARCHAR,
  "_REPLICATOR_SEQ" NUMBER(19,0),
  "_REPLICATOR_TS" TIMESTAMP_TZ(6)
);

-- read the target's columns (ALTER TABLE ... ADD COLUMN for each planned column it lacks)
SELECT * FROM "MAIN"."AWKWARD" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: ALTER TABLE ... DROP PRIMARY KEY, then ADD PRIMARY KEY (the plan's key), before the re-copy)
SHOW PRIMARY KEYS IN TABLE "MAIN"."AWKWARD";

-- read the staging table's columns (CREATE OR REPLACE it when they differ from the plan's)
SELECT * FROM "MAIN"."_REPLICATOR_STAGE_AWKWARD" LIMIT 0;

-- end the setup
COMMIT;

-- each batch:

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- clear staging
DELETE FROM "MAIN"."_REPLICATOR_STAGE_AWKWARD";

-- upload a Parquet file to the staging table's stage
PUT 'file://<each Parquet file of the batch>' @"MAIN".%_REPLICATOR_STAGE_AWKWARD/batch_attempt/ OVERWRITE = TRUE AUTO_COMPRESS = FALSE;

-- load staging from the uploaded files
COPY INTO "MAIN"."_REPLICATOR_STAGE_AWKWARD"
  FROM @"MAIN".%_REPLICATOR_STAGE_AWKWARD/batch_attempt/
  FILE_FORMAT = (TYPE = PARQUET USE_LOGICAL_TYPE = TRUE BINARY_AS_TEXT = FALSE)
  MATCH_BY_COLUMN_NAME = CASE_INSENSITIVE
  PURGE = TRUE
  FORCE = TRUE;

-- commit the load (staging only; the MERGE opens the batch's transaction)
COMMIT;

-- merge staged changes
MERGE INTO "MAIN"."AWKWARD" AS "tgt"
USING (
  SELECT
    "ID",
    "TITLE",
    "NOTE",
    "AMOUNT",
    "HAPPENED_AT",
    "RECORDED_AT",
    "DURATION",
    "BIG",
    PARSE_JSON("PAYLOAD") AS "PAYLOAD",
    "RAW",
    "MOOD",
    "TAGS",
    "FLAG",
    "FLAGS8",
    "IS_ACTIVE",
    "BORN",
    "MODEL_YEAR",
    "RATIO",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "MAIN"."_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "tgt"."TITLE" = "src"."TITLE",
    "tgt"."NOTE" = "src"."NOTE",
    "tgt"."AMOUNT" = "src"."AMOUNT",
    "tgt"."HAPPENED_AT" = "src"."HAPPENED_AT",
    "tgt"."RECORDED_AT" = "src"."RECORDED_AT",
    "tgt"."DURATION" = "src"."DURATION",
    "tgt"."BIG" = "src"."BIG",
    "tgt"."PAYLOAD" = "src"."PAYLOAD",
    "tgt"."RAW" = "src"."RAW",
    "tgt"."MOOD" = "src"."MOOD",
    "tgt"."TAGS" = "src"."TAGS",
    "tgt"."FLAG" = "src"."FLAG",
    "tgt"."FLAGS8" = "src"."FLAGS8",
    "tgt"."IS_ACTIVE" = "src"."IS_ACTIVE",
    "tgt"."BORN" = "src"."BORN",
    "tgt"."MODEL_YEAR" = "src"."MODEL_YEAR",
    "tgt"."RATIO" = "src"."RATIO",
    "tgt"."_OP" = "src"."_OP",
    "tgt"."_TS_MS" = "src"."_TS_MS",
    "tgt"."_SYNCED_AT" = "src"."_SYNCED_AT",
    "tgt"."_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "tgt"."_BINLOG_POS" = "src"."_BINLOG_POS"
WHEN NOT MATCHED AND "src"."_REPLICATOR_OP" <> 'd' THEN INSERT (
    "ID",
    "TITLE",
    "NOTE",
    "AMOUNT",
    "HAPPENED_AT",
    "RECORDED_AT",
    "DURATION",
    "BIG",
    "PAYLOAD",
    "RAW",
    "MOOD",
    "TAGS",
    "FLAG",
    "FLAGS8",
    "IS_ACTIVE",
    "BORN",
    "MODEL_YEAR",
    "RATIO",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS"
) VALUES (
    "src"."ID",
    "src"."TITLE",
    "src"."NOTE",
    "src"."AMOUNT",
    "src"."HAPPENED_AT",
    "src"."RECORDED_AT",
    "src"."DURATION",
    "src"."BIG",
    "src"."PAYLOAD",
    "src"."RAW",
    "src"."MOOD",
    "src"."TAGS",
    "src"."FLAG",
    "src"."FLAGS8",
    "src"."IS_ACTIVE",
    "src"."BORN",
    "src"."MODEL_YEAR",
    "src"."RATIO",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS"
);

-- record the batch
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP();

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- does the target hold rows? (none: the copy inserts instead of merging)
SELECT 1 FROM "MAIN"."AWKWARD" LIMIT 1;

-- in the MERGE's place, in each snapshot batch of a copy that began with the target empty: insert the copied rows
INSERT INTO "MAIN"."AWKWARD" (
    "ID",
    "TITLE",
    "NOTE",
    "AMOUNT",
    "HAPPENED_AT",
    "RECORDED_AT",
    "DURATION",
    "BIG",
    "PAYLOAD",
    "RAW",
    "MOOD",
    "TAGS",
    "FLAG",
    "FLAGS8",
    "IS_ACTIVE",
    "BORN",
    "MODEL_YEAR",
    "RATIO",
    "_OP",
    "_TS_MS",
    "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS"
)
SELECT
    "src"."ID",
    "src"."TITLE",
    "src"."NOTE",
    "src"."AMOUNT",
    "src"."HAPPENED_AT",
    "src"."RECORDED_AT",
    "src"."DURATION",
    "src"."BIG",
    "src"."PAYLOAD",
    "src"."RAW",
    "src"."MOOD",
    "src"."TAGS",
    "src"."FLAG",
    "src"."FLAGS8",
    "src"."IS_ACTIVE",
    "src"."BORN",
    "src"."MODEL_YEAR",
    "src"."RATIO",
    "src"."_OP",
    "src"."_TS_MS",
    "src"."_SYNCED_AT",
    "src"."_BINLOG_FILE",
    "src"."_BINLOG_POS"
FROM (
  SELECT
    "ID",
    "TITLE",
    "NOTE",
    "AMOUNT",
    "HAPPENED_AT",
    "RECORDED_AT",
    "DURATION",
    "BIG",
    PARSE_JSON("PAYLOAD") AS "PAYLOAD",
    "RAW",
    "MOOD",
    "TAGS",
    "FLAG",
    "FLAGS8",
    "IS_ACTIVE",
    "BORN",
    "MODEL_YEAR",
    "RATIO",
    "_OP",
    "_TS_MS",
    CURRENT_TIMESTAMP() AS "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "MAIN"."_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "MAIN"."AWKWARD" WHERE "_SYNCED_AT" < (SELECT "APPLIED_AT" FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?);
