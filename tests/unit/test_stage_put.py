"""``engine.job.stage_put.LandedUpload``: what travels with the tasks to PUT landed files (no
secret), and the PUT it runs (``stage_copy.put_landed``)."""

from __future__ import annotations

import pickle

from replicator.engine.job.stage_put import LandedUpload
from replicator.model.pipeline import (
    EngineConfig,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    TargetConfig,
)
from replicator.plan.statements.stage_copy import put_landed

SECRETS = ("pw-'secret", "oauth-token-secret", "key-passphrase-secret")


def _pipeline(landing: str, stage: str | None = "DB.RAW.LANDING") -> Pipeline:
    target = SnowflakeTarget(database="DB", schema="RAW", account="acct", user="u",
                             connection="prod", stage=stage, password=SECRETS[0],
                             token=SECRETS[1], private_key_file="/keys/k.p8",
                             private_key_file_pwd=SECRETS[2])
    return Pipeline(name="p", source=MySQLSource(), tables=(),
                    target=TargetConfig(warehouse=target), engine=EngineConfig(landing=landing))


def test_the_upload_carries_no_secret_and_travels_as_json_and_pickle():
    upload = LandedUpload.of(_pipeline("/data/landing"))
    assert upload is not None and upload.landing == "/data/landing"
    text = upload.to_json()
    assert not any(secret in text for secret in SECRETS)
    assert not any(secret in repr(pickle.dumps(upload)) for secret in SECRETS)
    again = LandedUpload.from_json(text)
    assert again == upload and again.target.private_key_file == "/keys/k.p8"
    assert again.target.connection == "prod"  # the executor finds its credential there


def test_only_a_stage_over_a_local_landing_zone_is_uploaded_to():
    assert LandedUpload.of(_pipeline("s3://bucket/landing")) is None  # Snowflake reads it
    assert LandedUpload.of(_pipeline("/data/landing", stage=None)) is None
    assert LandedUpload.of(_pipeline("relative/landing")).landing.startswith("/")


def test_a_landed_file_goes_to_its_landing_relative_folder_of_the_stage():
    path = "/data/landing/stream/epoch=0/a_4-a_9/00000-shop.items.parquet"
    assert put_landed("DB.RAW.LANDING", "/data/landing", path) == (
        f"PUT 'file://{path}' @DB.RAW.LANDING/stream/epoch=0/a_4-a_9/ "
        "OVERWRITE = TRUE AUTO_COMPRESS = FALSE")
    scratch = "/data/landing/snapshot/e0/t/c0/_uploading/chunk-00000000.parquet"
    assert put_landed("DB.RAW.LANDING", "/data/landing",
                      "/data/landing/snapshot/e0/t/c0/chunk-00000000.parquet", scratch) == (
        f"PUT 'file://{scratch}' @DB.RAW.LANDING/snapshot/e0/t/c0/ "
        "OVERWRITE = TRUE AUTO_COMPRESS = FALSE")


def test_files_of_tables_only_the_driver_stages_are_not_put():
    """A table on the driver's road (R312: dead letters here) is read from the landing
    zone by the driver, never COPYed from the stage: its files are not PUT; a table a
    stage-road routed target also reads still is."""
    from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
    from replicator.model.pipeline import TablePipeline
    from replicator.model.selection import TableSelection
    from replicator.plan import build_plan

    def table(name: str) -> SourceTable:
        return SourceTable("shop", name, tuple(
            SourceColumn(c, MySQLType.parse(t), True, i)
            for i, (c, t) in enumerate((("id", "int"), ("body", "varchar(10)")), start=1)),
            primary_key=("id",))

    catalog = Catalog(tables=(table("notes"), table("items"), table("logs_1")))
    tables = (TablePipeline("shop", "notes", on_error="dead_letter"),
              TablePipeline("shop", "items"),
              TablePipeline("shop", "logs_1", on_error="dead_letter"),
              TablePipeline("", "", target_table="LOGS",
                            selection=TableSelection((r"shop\.logs_.*",))))
    pipeline = _pipeline("/data/landing")
    pipeline = Pipeline(name="p", source=MySQLSource(), tables=tables,
                        target=pipeline.target, engine=pipeline.engine)
    upload = LandedUpload.of(pipeline, build_plan(pipeline, catalog))
    assert upload is not None and upload.driver_staged == ("shop.notes",)
    again = LandedUpload.from_json(upload.to_json())
    assert again == upload
    assert not again.wants("SHOP.NOTES") and again.wants("shop.items")
    assert again.wants("shop.logs_1")  # the routed LOGS reads it from the stage
