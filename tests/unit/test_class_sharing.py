"""The driver JVM's class archive: recorded by one run at a time, taken into use only when a
real JVM maps it (a truncated archive makes java abort, measured), off on request."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from replicator.engine.job import class_sharing

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="needs java")


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(tmp_path), **more}


def _settle(path: Path) -> None:
    old = time.time() - class_sharing.SETTLED_S - 5
    os.utime(path, (old, old))


def test_off_on_request(tmp_path: Path) -> None:
    assert class_sharing.java_options(_env(tmp_path, REPLICATOR_SPARK_CDS="0")) == []
    assert not (tmp_path / "replicator").exists()


def test_one_run_records_and_the_others_do_not_meanwhile(tmp_path: Path) -> None:
    first = class_sharing.java_options(_env(tmp_path))
    assert first[0].startswith("-XX:ArchiveClassesAtExit=")
    assert first[0].endswith(".tmp") and str(tmp_path / "replicator") in first[0]
    assert "-XX:+VerifySharedSpaces" in first  # recorded with its checksum
    assert class_sharing.java_options(_env(tmp_path)) == []  # the first one is recording
    assert class_sharing.java_options(_env(tmp_path), record=False) == []


@pytest.mark.parametrize("cut", [None, 0.5, 0.9])
def test_a_truncated_or_foreign_file_is_removed_not_used(tmp_path: Path, cut) -> None:
    first = class_sharing.java_options(_env(tmp_path))
    written = Path(first[0].split("=", 1)[1])
    if cut is None:  # not an archive at all
        written.write_bytes(b"\0" * (class_sharing.MIN_BYTES + 10))
    else:  # what a JVM killed while writing leaves: java aborts on it (SIGBUS), measured
        whole = tmp_path / "whole.jsa"
        subprocess.run(["java", f"-XX:ArchiveClassesAtExit={whole}", "-XX:+VerifySharedSpaces",
                        "-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-version"],
                       check=True, capture_output=True)
        data = whole.read_bytes()
        # Cut, then zeros to the full length or beyond: java -version starts with it.
        written.write_bytes(data[: int(len(data) * cut)] + b"\0" * class_sharing.MIN_BYTES)
    _settle(written)
    again = class_sharing.java_options(_env(tmp_path))
    assert not written.exists()
    assert not any(o.startswith("-XX:SharedArchiveFile=") for o in again)


def test_a_finished_archive_that_maps_is_used(tmp_path: Path, monkeypatch) -> None:
    first = class_sharing.java_options(_env(tmp_path))
    written = Path(first[0].split("=", 1)[1])
    # A real dynamic archive, recorded by a JVM that ran and exited as a run's does.
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={written}", *first[1:], "-version"],
                   check=True, capture_output=True)
    _settle(written)
    monkeypatch.setattr(class_sharing, "MIN_BYTES", 1)  # java -version's archive is ~100 KB
    stale, recent = (written.parent / f"spark-{n}.jsa" for n in ("0ld", "recent"))
    for other in (stale, recent):
        other.write_bytes(b"another installation's archive")
    old = time.time() - class_sharing.UNUSED_S - 60
    os.utime(stale, (old, old))
    options = class_sharing.java_options(_env(tmp_path))
    assert not stale.exists() and recent.exists()  # unused for 30 days: pruned
    final = written.parent / written.name.split(".jsa.")[0]
    assert options[0] == f"-XX:SharedArchiveFile={final}.jsa"
    assert Path(f"{final}.jsa").is_file() and not written.exists()
    assert not list(written.parent.glob("*.recording"))
    # And java starts with it.
    done = subprocess.run(["java", options[0], "-Xlog:cds=off", "-version"], capture_output=True)
    assert done.returncode == 0


def test_a_cache_path_that_cannot_be_quoted_is_left_alone(tmp_path: Path) -> None:
    spaced = tmp_path / "with space"
    assert class_sharing.java_options(_env(spaced)) == []


def test_an_archive_recorded_at_installation_is_taken_into_use_at_once(tmp_path: Path,
                                                                       monkeypatch) -> None:
    # engine.job.record_archive waits for its JVM to exit, so its archive needs no settling.
    first = class_sharing.java_options(_env(tmp_path))
    written = Path(first[0].split("=", 1)[1])
    subprocess.run(["java", f"-XX:ArchiveClassesAtExit={written}", *first[1:], "-version"],
                   check=True, capture_output=True)
    monkeypatch.setattr(class_sharing, "MIN_BYTES", 1)  # java -version's archive is ~100 KB
    final = class_sharing.take_into_use(written, _env(tmp_path))
    assert final == written.parent / f"{written.name.split('.jsa.')[0]}.jsa"
    assert final.is_file()
    assert not written.exists() and not list(written.parent.glob("*.recording"))
    assert class_sharing.java_options(_env(tmp_path))[0] == f"-XX:SharedArchiveFile={final}"


def test_an_unusable_recorded_archive_is_removed(tmp_path: Path) -> None:
    first = class_sharing.java_options(_env(tmp_path))
    written = Path(first[0].split("=", 1)[1])
    written.write_bytes(b"\0" * (class_sharing.MIN_BYTES + 10))  # not an archive
    assert class_sharing.take_into_use(written, _env(tmp_path)) is None
    assert not written.exists()


def test_enabled_unless_turned_off(tmp_path: Path) -> None:
    assert class_sharing.enabled(_env(tmp_path))
    assert not class_sharing.enabled(_env(tmp_path, REPLICATOR_SPARK_CDS="off"))
