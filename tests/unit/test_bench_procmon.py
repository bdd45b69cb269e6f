"""The bench's CPU window (``procmon.TreeUsage.cpu_between``): the driver's share of the
stream's CPU is read from it (issue 15's target), start-up and shutdown left out; and the
labels the CPU budget splits Spark's Python processes by."""

from __future__ import annotations

from bench.procmon import TreeUsage, label_of


def test_a_window_counts_the_cpu_between_the_samples_around_it():
    usage = TreeUsage(cpu_timeline=[
        (100.0, {"driver": 1.0, "jvm": 2.0}),  # start-up
        (100.2, {"driver": 1.5, "jvm": 3.0}),
        (100.4, {"driver": 1.6, "jvm": 3.5, "python_workers": 2.0}),  # a worker appeared
        (100.6, {"driver": 1.9, "jvm": 4.0, "python_workers": 3.0}),
        (100.8, {"driver": 2.5, "jvm": 4.1, "python_workers": 3.0}),  # shutdown
    ])
    # From the last sample at or before the start to the first at or after the end.
    assert usage.cpu_between(100.3, 100.6) == {"driver": 0.4, "jvm": 1.0, "python_workers": 3.0}
    assert usage.cpu_between(100.2, 100.6) == {"driver": 0.4, "jvm": 1.0, "python_workers": 3.0}
    # A window past the samples reads to the last one.
    assert usage.cpu_between(100.7, 105.0) == {"driver": 0.6, "jvm": 0.1, "python_workers": 0.0}
    assert TreeUsage().cpu_between(0.0, 1.0) == {}


def test_spark_python_processes_are_labelled_by_the_worker_module_they_serve():
    python = "/venv/bin/python"
    assert label_of(f"{python} -m pyspark.daemon pyspark.sql.worker.plan_data_source_read",
                    "python_workers") == "pyspark.daemon pyspark.sql.worker.plan_data_source_read"
    assert label_of(f"{python} -m pyspark.daemon", "python_workers") == "pyspark.daemon"
    assert label_of(f"{python} -u -m pyspark.sql.streaming.python_streaming_source_runner",
                    "python_workers") == "pyspark.sql.streaming.python_streaming_source_runner"
    assert label_of("/usr/bin/java -cp x", "jvm") == "jvm"
