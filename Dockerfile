# replicator: Python 3.11 + Java 17 (Spark) + pyspark + replicator, running as a non-root user.
# Build: docker build -t replicator .      Run: docker run --rm replicator validate /pipelines
FROM python:3.11-slim-bookworm

# Java 17 runs Spark's JVM; procps gives Spark's scripts `ps`. Debian's package versions are
# not pinned: bookworm replaces them with security updates and drops the old ones, so a pin
# would break the build; the Python side is pinned below. /usr/share/man/man1 is missing in
# slim images and some JRE post-install scripts fail without it. The java-17 link gives
# JAVA_HOME one path on amd64 and arm64 (the package directory is named per architecture).
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/* \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JAVA_HOME=/usr/lib/jvm/java-17

WORKDIR /opt/replicator
# Dependencies first so code edits do not reinstall pyspark; docker/constraints.txt pins them
# to the versions the test suite ran with (scripts/docker-constraints writes it).
COPY pyproject.toml README.md ./
COPY docker/constraints.txt docker/constraints.txt
COPY replicator/__init__.py replicator/__init__.py
RUN pip install --no-cache-dir --constraint docker/constraints.txt \
        ".[mysql,duckdb,spark,snowflake]" \
    && pip uninstall -y replicator
COPY replicator replicator
COPY schemas schemas
# setup.py builds the compiled row decoder (replicator/source/fast/compiled.pyx); gcc is there
# only for that step. Without it the install still succeeds and the Python decoder runs.
COPY setup.py ./
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install --no-cache-dir --no-deps . \
    && apt-get purge -y --auto-remove gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python -c "import replicator.source.fast.compiled" \
    && groupadd --gid 10001 replicator \
    && useradd --create-home --uid 10001 --gid 10001 replicator \
    && mkdir -p /data /pipelines \
    && chown replicator:replicator /data

# Numeric, so Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
WORKDIR /data
# Executors run the same interpreter, which has replicator installed.
ENV PYSPARK_PYTHON=/usr/local/bin/python
ENTRYPOINT ["replicator"]
CMD ["--help"]
