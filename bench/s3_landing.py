"""An object-store landing zone on this machine: moto's S3 server, and fakesnow reading
external stages from it. Used by the bench (``bench.snapshot.run_stage_snapshot``) and the
tests (``tests.fixtures.s3_landing``).

``s3_server`` runs ``moto.server.ThreadedMotoServer`` on a free port with one bucket,
``landing``; ``s3_environment`` points the AWS SDK of pyarrow (and boto3) at it by the
standard variables (``AWS_ENDPOINT_URL``, the keys, the region), so ``engine.landing:
s3://landing/...`` is written and read by the product's own ``pyarrow.fs`` code, unchanged.

fakesnow 0.12.1 resolves ``COPY INTO t FROM @stage FILES = (...)`` of an external stage
(``CREATE STAGE ... URL = 's3://...'``) to ``s3://`` URLs and reads them with DuckDB's
``read_parquet``, which needs DuckDB's httpfs extension (not installable here: DuckDB
downloads it) and would not know the moto endpoint. ``read_external_stages`` is the
emulator patch, bench and test code only: fakesnow's Parquet reader is handed a local copy
of each ``s3://`` file, fetched through pyarrow from the endpoint at every read. Its scope:
Parquet files read from ``s3://`` URLs by fakesnow's COPY (their column names and their
rows); fakesnow's stage resolution, FILES list, MATCH_BY_COLUMN_NAME, FORCE and load history
stay its own, and the product is not touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from typing import Any

BUCKET = "landing"
_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def s3_environment(endpoint: str) -> dict[str, str]:
    """What a process needs to reach the server's S3 (a CLI subprocess gets it too)."""
    return {**_ENVIRONMENT, "AWS_ENDPOINT_URL": endpoint}


@contextlib.contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 on a free port of 127.0.0.1 with the bucket ``landing``: its endpoint."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        boto3.client("s3", endpoint_url=endpoint, **_boto3_settings()).create_bucket(
            Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


def _boto3_settings() -> dict[str, str]:
    return {"aws_access_key_id": _ENVIRONMENT["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": _ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
            "region_name": _ENVIRONMENT["AWS_REGION"]}


_patched = False


def read_external_stages() -> None:
    """fakesnow reads ``s3://`` Parquet files through a local copy (the module docstring);
    the process's AWS variables say where the S3 is."""
    global _patched
    if _patched:
        return
    import fakesnow.copy_into as copy_into

    mirror = tempfile.mkdtemp(prefix="fakesnow-s3-")
    original = copy_into.ReadParquet.read_expression

    def local_copy(url: str) -> str:
        from pyarrow import fs

        if not url.startswith("s3://"):
            return url
        filesystem, inner = fs.FileSystem.from_uri(url)
        local = os.path.join(mirror, inner)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        fs.copy_files(inner, local, source_filesystem=filesystem,
                      destination_filesystem=fs.LocalFileSystem())
        return local

    def read_expression(self: Any, url: str) -> Any:
        return original(self, local_copy(url))

    copy_into.ReadParquet.read_expression = read_expression
    _patched = True
