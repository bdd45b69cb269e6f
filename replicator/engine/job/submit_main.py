"""The job spark-submit runs for ``replicator run --master <cluster>``: the same ``run``
command, in-process, inside the driver spark-submit started.

Arguments: ``PIPELINE_FILE [run options...]``, as ``launch.submit_command`` writes them. The
``REPLICATOR_SUBMITTED`` marker tells ``run`` not to submit again but to start Spark here
(``SparkSession.builder`` attaches to the JVM spark-submit launched, with its settings).
"""

import os
import sys

if __name__ == "__main__":
    # spark-submit puts this file's directory (replicator/engine/job) first on sys.path; its
    # modules must only be imported as replicator.engine.*.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    os.environ["REPLICATOR_SUBMITTED"] = "1"
    from replicator.engine.job.launch import die_with_parent

    die_with_parent()  # the JVM that started us is gone: so is the job
    sys.argv = ["replicator", "run", *sys.argv[1:]]
    from replicator.cli.main import main

    main()
