# replicator: Python 3.11 + Java 17 (Spark) + pyspark + replicator, running as a non-root user.
# Build: docker build -t replicator .      Run: docker run --rm replicator validate /pipelines
FROM python:3.11-slim-bookworm

# Java 17 runs Spark's JVM; procps gives Spark's scripts `ps`.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

WORKDIR /opt/replicator
# Dependencies first so code edits do not reinstall pyspark.
COPY pyproject.toml README.md ./
COPY replicator/__init__.py replicator/__init__.py
RUN pip install --no-cache-dir ".[mysql,duckdb,spark,snowflake]" \
    && pip uninstall -y replicator
COPY replicator replicator
COPY schemas schemas
RUN pip install --no-cache-dir --no-deps . \
    && useradd --create-home --uid 10001 replicator \
    && mkdir -p /data /pipelines \
    && chown replicator:replicator /data

USER replicator
WORKDIR /data
# Executors run the same interpreter, which has replicator installed.
ENV PYSPARK_PYTHON=/usr/local/bin/python
ENTRYPOINT ["replicator"]
CMD ["--help"]
