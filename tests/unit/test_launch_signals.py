"""``run_submit``: SIGTERM to ``replicator run`` reaches the Python driver under spark-submit
once (it stops gracefully: exit 130), the launcher in between ignores it, and a SIGKILL of
``replicator run`` takes the launcher down. Stand-ins replace the JVM and the driver: no Spark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

DRIVER = """\
import signal, sys, time
from pathlib import Path
from replicator.engine.job.launch import die_with_parent
die_with_parent()  # as replicator/engine/job/submit_main.py does
marker = Path(sys.argv[1])
def stop(signum, frame):
    marker.write_text(marker.read_text() + signal.Signals(signum).name + "\\n")
    sys.exit(130)
signal.signal(signal.SIGTERM, stop)
marker.write_text("ready\\n")
time.sleep(60)
"""

# Like spark-submit: a launcher process that starts the driver and exits with its status.
LAUNCHER = """\
import subprocess, sys
sys.exit(subprocess.call([sys.executable, sys.argv[1], sys.argv[2]]))
"""

SUPERVISOR = """\
import sys
from replicator.engine.job.launch import SubmitCommand, run_submit
sys.exit(run_submit(SubmitCommand(argv=[sys.executable, *sys.argv[1:]])))
"""


def _start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    (tmp_path / "submit_main.py").write_text(DRIVER)
    (tmp_path / "launcher.py").write_text(LAUNCHER)
    (tmp_path / "supervisor.py").write_text(SUPERVISOR)
    marker = tmp_path / "marker"
    process = subprocess.Popen(
        [sys.executable, str(tmp_path / "supervisor.py"), str(tmp_path / "launcher.py"),
         str(tmp_path / "submit_main.py"), str(marker)],
        cwd=Path(__file__).resolve().parents[2],
    )
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text().startswith("ready")):
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.05)
    return process, marker


def _descendants_alive(marker: Path) -> bool:
    needle = str(marker).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def test_sigterm_reaches_the_driver_once_and_its_status_is_the_run_status(tmp_path):
    process, marker = _start(tmp_path)
    os.kill(process.pid, signal.SIGTERM)
    assert process.wait(timeout=30) == 130
    assert marker.read_text() == "ready\nSIGTERM\n"  # once, and the launcher survived it


def test_sigkill_of_the_run_takes_the_job_down(tmp_path):
    process, marker = _start(tmp_path)
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 10
    while _descendants_alive(marker):
        assert time.monotonic() < deadline, "the launcher or driver outlived replicator run"
        time.sleep(0.1)
