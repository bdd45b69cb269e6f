"""Class Data Sharing for the driver's JVM: Spark's classes mapped from an archive, not loaded.

The driver JVM spends most of a run's start-up loading and verifying Spark's ~20,000 classes.
Java 13+ can record the classes an application loaded into a dynamic archive when the JVM
exits (``-XX:ArchiveClassesAtExit``) and map it at the next start (``-XX:SharedArchiveFile``).
Measured on this project's 2-core machine (Spark 4.3, Java 17, load ~4): the session starts in
7.3 s instead of 12.1 s, and its first job takes 2.3 s instead of 4.5 s.

The archive belongs to one JVM build and one class path, so its name carries a digest of the
java binary, the pyspark version and the jars (their path included); it lives in the user's cache
(``$XDG_CACHE_HOME/replicator``, else ``~/.cache/replicator``; ~150 MB). The first run writes
it when its JVM exits, under a temporary name; a later run takes a finished one into use only
after a JVM maps it and verifies its checksum, because a truncated archive makes the JVM
crash (SIGBUS, measured) rather than start without it. ``REPLICATOR_SPARK_CDS=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

# A temporary archive untouched this long is finished (its JVM wrote it at exit) or abandoned.
SETTLED_S = 60.0
# A run recording the archive keeps others from recording one too for this long.
RECORDING_S = 900.0
# A finished archive is at least this big (a JVM that died while writing leaves less, or not).
MIN_BYTES = 1 << 20


def java_options(environ: Mapping[str, str] | None = None, *,
                 record: bool = True) -> list[str]:
    """The driver JVM's options for the archive: map it, or (``record``) record one at exit;
    [] when off or when no java, cache or pyspark can be found. A JVM that lives long and
    loads more than a run does (a test session's) maps an archive but does not record one."""
    env = os.environ if environ is None else environ
    if _off(env):
        return []
    java = _java(env)
    if java is None:
        return []
    try:
        cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replicator"
        if any(c in str(cache) for c in " \t\"'\\"):
            return []  # the options travel inside one quoted spark-submit argument
        name = f"spark-{_digest(java)}.jsa"
        final = cache / name
        quiet = "-Xlog:cds=off,cds+dynamic=off"  # "Skipping ...: Signed JAR" and the like
        if final.is_file():
            os.utime(final)  # in use: _prune keeps it
            return [f"-XX:SharedArchiveFile={final}", quiet]
        if _promote(java, cache, name, final):
            return [f"-XX:SharedArchiveFile={final}", quiet]
        if not record:
            return []
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _claim(cache / f"{name}.recording"):
            return []  # another run records it (writing one costs its JVM ~15 s at exit)
        # With its checksum, so that the run taking it into use can verify every byte.
        return [f"-XX:ArchiveClassesAtExit={cache / f'{name}.{uuid.uuid4().hex[:12]}.tmp'}",
                "-XX:+VerifySharedSpaces", quiet]
    except OSError:
        return []  # no writable cache: start without it


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    """Whether runs use an archive at all: not ``REPLICATOR_SPARK_CDS=0``, and a java found."""
    env = os.environ if environ is None else environ
    return not _off(env) and _java(env) is not None


def _off(env: Mapping[str, str]) -> bool:
    return env.get("REPLICATOR_SPARK_CDS", "1").strip().lower() in ("0", "false", "no", "off")


def _claim(marker: Path) -> bool:
    """One run at a time records the archive: the marker is created exclusively, and taken
    over once older than ``RECORDING_S`` (its run died before its JVM wrote anything)."""
    for _ in range(2):
        try:
            os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return True
        except FileExistsError:
            if time.time() - marker.stat().st_mtime < RECORDING_S:
                return False
            marker.unlink(missing_ok=True)
    return False


def _java(env: Mapping[str, str]) -> str | None:
    """The java spark-class runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = env.get("JAVA_HOME")
    candidate = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(candidate) if candidate and os.path.isfile(candidate) else None


def _digest(java: str) -> str:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    # The jars' own path too: an archive recorded with another class path (another venv) is
    # ignored by java, so each installation keeps its own.
    parts = [java, str(os.stat(java).st_mtime_ns), pyspark.__version__, str(jars.resolve())]
    if jars.is_dir():
        parts += sorted(f"{p.name}:{p.stat().st_size}" for p in jars.iterdir())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _promote(java: str, cache: Path, name: str, final: Path) -> bool:
    """A finished temporary archive becomes the archive once a JVM maps it and exits 0;
    the others settled long enough are removed."""
    if not cache.is_dir():
        return False
    now = time.time()
    for candidate in sorted(cache.glob(f"{name}.*.tmp"), key=lambda p: -p.stat().st_mtime):
        status = candidate.stat()
        if now - status.st_mtime < SETTLED_S:
            continue  # perhaps still being written
        if _take(java, candidate, final):
            return True
    return False


def _take(java: str, candidate: Path, final: Path) -> bool:
    """``candidate`` (finished) becomes ``final`` if a JVM maps it, else it is removed."""
    if candidate.stat().st_size >= MIN_BYTES and _maps(java, candidate):
        os.replace(candidate, final)
        os.utime(final)
        final.with_name(f"{final.name}.recording").unlink(missing_ok=True)
        _prune(final.parent, final)
        return True
    candidate.unlink(missing_ok=True)
    return False


def take_into_use(recorded: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The archive ``recorded`` (``-XX:ArchiveClassesAtExit`` of a JVM known to have exited:
    ``engine.job.record_archive``) taken into use now, not after ``SETTLED_S``; None when it is
    unusable (removed) or no java is found."""
    java = _java(os.environ if environ is None else environ)
    if java is None or not recorded.is_file():
        return None
    final = recorded.with_name(recorded.name.rsplit(".", 2)[0])  # spark-<digest>.jsa
    return final if _take(java, recorded, final) else None


# An archive no run has used for this long belongs to a Java, Spark or venv that is gone.
UNUSED_S = 30 * 24 * 3600.0


def _prune(cache: Path, keep: Path) -> None:
    now = time.time()
    for archive in cache.glob("spark-*.jsa"):
        if archive != keep and now - archive.stat().st_mtime > UNUSED_S:
            archive.unlink(missing_ok=True)


# The first bytes of a dynamic archive (HotSpot's CDS_DYNAMIC_ARCHIVE_MAGIC, little endian):
# java ignores a file without them, so only a file with them is worth taking into use.
_DYNAMIC_MAGIC = bytes.fromhex("a8ab0bf0")


def _maps(java: str, archive: Path) -> bool:
    """A JVM maps the archive's regions and its checksum holds. java ignores a foreign file,
    aborts on a truncated one, and starts without a corrupt one (the checksum check), so the
    exit code alone tells too little: its own log says."""
    with archive.open("rb") as handle:
        if handle.read(4) != _DYNAMIC_MAGIC:
            return False
    try:
        done = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", "-XX:+VerifySharedSpaces",
                               "-Xlog:cds=info", "-version"],
                              capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    log = done.stdout + done.stderr
    return (done.returncode == 0 and "Mapped dynamic region" in log
            and "verification failed" not in log)
