-- demo.awkward -> MAIN.AWKWARD (duckdb)

-- snapshot: each chunk is read from MySQL with (? = the chunk's key bounds):
--   SELECT `id`, `title`, `note`, CAST(`amount` AS CHAR) AS `amount`, CAST(`happened_at` AS CHAR) AS `happened_at`, CAST(`recorded_at` AS CHAR) AS `recorded_at`, CAST(`duration` AS CHAR) AS `duration`, `big`, `payload`, `raw`, `mood`, `tags`, CAST(`flag` AS UNSIGNED) AS `flag`, CAST(`flags8` AS UNSIGNED) AS `flags8`, `is_active`, CAST(`born` AS CHAR) AS `born`, `model_year`, `ratio` FROM `demo`.`awkward`

-- create schema
CREATE SCHEMA IF NOT EXISTS "MAIN";

-- create target table
CREATE TABLE IF NOT EXISTS "MAIN"."AWKWARD" (
  "ID" DECIMAL(20,0) NOT NULL,
  "TITLE" VARCHAR,
  "NOTE" VARCHAR,
  "AMOUNT" DECIMAL(38,10),
  "HAPPENED_AT" TIMESTAMP,
  "RECORDED_AT" TIMESTAMPTZ,
  "DURATION" VARCHAR,
  "BIG" DECIMAL(20,0),
  "PAYLOAD" JSON,
  "RAW" BLOB,
  "MOOD" VARCHAR,
  "TAGS" VARCHAR,
  "FLAG" BOOLEAN,
  "FLAGS8" BLOB,
  "IS_ACTIVE" BOOLEAN,
  "BORN" DATE,
  "MODEL_YEAR" SMALLINT,
  "RATIO" DOUBLE,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_SYNCED_AT" TIMESTAMPTZ,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
  PRIMARY KEY ("ID")
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
SELECT * FROM "MAIN"."AWKWARD" LIMIT 0;

-- read the target's primary key (another key, after a key change in MySQL: the table is rebuilt under this one, in one transaction, before the re-copy)
SELECT constraint_column_names FROM duckdb_constraints() WHERE lower(schema_name) = lower(?) AND lower(table_name) = lower(?) AND constraint_type = ?;

-- each batch:

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_AWKWARD" (
  "ID" DECIMAL(20,0),
  "TITLE" VARCHAR,
  "NOTE" VARCHAR,
  "AMOUNT" DECIMAL(38,10),
  "HAPPENED_AT" TIMESTAMP,
  "RECORDED_AT" TIMESTAMPTZ,
  "DURATION" VARCHAR,
  "BIG" DECIMAL(20,0),
  "PAYLOAD" VARCHAR,
  "RAW" BLOB,
  "MOOD" VARCHAR,
  "TAGS" VARCHAR,
  "FLAG" BOOLEAN,
  "FLAGS8" BLOB,
  "IS_ACTIVE" BOOLEAN,
  "BORN" DATE,
  "MODEL_YEAR" SMALLINT,
  "RATIO" DOUBLE,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
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
    CAST("PAYLOAD" AS JSON) AS "PAYLOAD",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "TITLE" = "src"."TITLE",
    "NOTE" = "src"."NOTE",
    "AMOUNT" = "src"."AMOUNT",
    "HAPPENED_AT" = "src"."HAPPENED_AT",
    "RECORDED_AT" = "src"."RECORDED_AT",
    "DURATION" = "src"."DURATION",
    "BIG" = "src"."BIG",
    "PAYLOAD" = "src"."PAYLOAD",
    "RAW" = "src"."RAW",
    "MOOD" = "src"."MOOD",
    "TAGS" = "src"."TAGS",
    "FLAG" = "src"."FLAG",
    "FLAGS8" = "src"."FLAGS8",
    "IS_ACTIVE" = "src"."IS_ACTIVE",
    "BORN" = "src"."BORN",
    "MODEL_YEAR" = "src"."MODEL_YEAR",
    "RATIO" = "src"."RATIO",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS"
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

-- renew the run's lease (no row updated: another run took it, roll back and stop)
UPDATE "MAIN"."_REPLICATOR_STATE_LEASE" SET "RENEWED_AT" = CURRENT_TIMESTAMP WHERE "PIPELINE" = ? AND "GENERATION" = ?;

-- commit the batch
COMMIT;

-- each snapshot batch (a group of chunk files; the warehouse runs the transform step over them):

-- begin the batch's transaction
BEGIN TRANSACTION;

-- skip a batch already applied (a row: ROLLBACK and stop)
SELECT 1 FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?;

-- create staging table
CREATE TEMPORARY TABLE IF NOT EXISTS "_REPLICATOR_STAGE_AWKWARD" (
  "ID" DECIMAL(20,0),
  "TITLE" VARCHAR,
  "NOTE" VARCHAR,
  "AMOUNT" DECIMAL(38,10),
  "HAPPENED_AT" TIMESTAMP,
  "RECORDED_AT" TIMESTAMPTZ,
  "DURATION" VARCHAR,
  "BIG" DECIMAL(20,0),
  "PAYLOAD" VARCHAR,
  "RAW" BLOB,
  "MOOD" VARCHAR,
  "TAGS" VARCHAR,
  "FLAG" BOOLEAN,
  "FLAGS8" BLOB,
  "IS_ACTIVE" BOOLEAN,
  "BORN" DATE,
  "MODEL_YEAR" SMALLINT,
  "RATIO" DOUBLE,
  "_OP" VARCHAR,
  "_TS_MS" BIGINT,
  "_BINLOG_FILE" VARCHAR,
  "_BINLOG_POS" BIGINT,
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
SELECT CAST("id" AS DECIMAL(20,0)) AS "ID", "title" AS "TITLE", "note" AS "NOTE", CAST(round_even("amount", 10) AS DECIMAL(38,10)) AS "AMOUNT", CAST("happened_at" AS TIMESTAMP) AS "HAPPENED_AT", CAST("recorded_at" AS TIMESTAMPTZ) AS "RECORDED_AT", "duration" AS "DURATION", CAST("big" AS DECIMAL(20,0)) AS "BIG", "payload" AS "PAYLOAD", "raw" AS "RAW", "mood" AS "MOOD", "tags" AS "TAGS", ("flag" <> 0) AS "FLAG", unhex(lpad(to_hex(CAST("flags8" AS UBIGINT)), 2, '0')) AS "FLAGS8", ("is_active" <> 0) AS "IS_ACTIVE", CAST("born" AS DATE) AS "BORN", CAST("model_year" AS SMALLINT) AS "MODEL_YEAR", CAST("ratio" AS DOUBLE) AS "RATIO", "__replicator_final_op" AS "_OP", "__replicator_ts_ms" AS "_TS_MS", "__replicator_file" AS "_BINLOG_FILE", "__replicator_pos" AS "_BINLOG_POS", "__replicator_final_op" AS "_REPLICATOR_OP", timezone('UTC', make_timestamp("__replicator_ts_ms" * 1000)) AS "_REPLICATOR_TS", row_number() OVER (ORDER BY "__replicator_file_seq", "__replicator_pos", "__replicator_row_index", "__replicator_sub", "__replicator_ord") - 1 AS "_REPLICATOR_SEQ"
FROM kept;

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
    CAST("PAYLOAD" AS JSON) AS "PAYLOAD",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
ON "tgt"."ID" = "src"."ID"
WHEN MATCHED AND "src"."_REPLICATOR_OP" = 'd' THEN DELETE
WHEN MATCHED THEN UPDATE SET
    "TITLE" = "src"."TITLE",
    "NOTE" = "src"."NOTE",
    "AMOUNT" = "src"."AMOUNT",
    "HAPPENED_AT" = "src"."HAPPENED_AT",
    "RECORDED_AT" = "src"."RECORDED_AT",
    "DURATION" = "src"."DURATION",
    "BIG" = "src"."BIG",
    "PAYLOAD" = "src"."PAYLOAD",
    "RAW" = "src"."RAW",
    "MOOD" = "src"."MOOD",
    "TAGS" = "src"."TAGS",
    "FLAG" = "src"."FLAG",
    "FLAGS8" = "src"."FLAGS8",
    "IS_ACTIVE" = "src"."IS_ACTIVE",
    "BORN" = "src"."BORN",
    "MODEL_YEAR" = "src"."MODEL_YEAR",
    "RATIO" = "src"."RATIO",
    "_OP" = "src"."_OP",
    "_TS_MS" = "src"."_TS_MS",
    "_SYNCED_AT" = "src"."_SYNCED_AT",
    "_BINLOG_FILE" = "src"."_BINLOG_FILE",
    "_BINLOG_POS" = "src"."_BINLOG_POS"
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
INSERT INTO "MAIN"."_REPLICATOR_STATE" ("PIPELINE", "TABLE", "BATCH_ID", "END_OFFSET", "APPLIED_AT") SELECT ?, ?, ?, ?, CURRENT_TIMESTAMP;

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
    CAST("PAYLOAD" AS JSON) AS "PAYLOAD",
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
    CURRENT_TIMESTAMP AS "_SYNCED_AT",
    "_BINLOG_FILE",
    "_BINLOG_POS",
    "_REPLICATOR_OP",
    "_REPLICATOR_TS"
  FROM "_REPLICATOR_STAGE_AWKWARD"
  QUALIFY ROW_NUMBER() OVER (PARTITION BY "ID" ORDER BY "_REPLICATOR_SEQ" DESC) = 1
) AS "src"
WHERE "src"."_REPLICATOR_OP" <> 'd';

-- after the last chunk of a re-copy (replicator snapshot --table; its chunks run the snapshot batch program after an empty first batch): delete the rows no batch wrote since that first batch
DELETE FROM "MAIN"."AWKWARD" WHERE "_SYNCED_AT" < (SELECT "APPLIED_AT" FROM "MAIN"."_REPLICATOR_STATE" WHERE "PIPELINE" = ? AND "TABLE" = ? AND "BATCH_ID" = ?);
