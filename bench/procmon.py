"""Memory and CPU of a process tree, read from /proc (Linux), plus a line-timestamping runner.

``replicator run`` is a tree: the Python driver, the JVM it starts (Spark), the JVM's Python
planner process for the data source and its Python workers (executors' ``read``). Peak memory
is the largest *sum* of resident set sizes seen in one sample across the whole tree, and the
per-role peaks say who holds it. That sum counts a page shared by several processes once per
process: Spark's Python workers are forked from a daemon per worker kind and share its pages
(the interpreter, pyspark, pyarrow). So the largest sum of proportional set sizes (PSS, from
``/proc/<pid>/smaps_rollup``: a shared page split among its sharers) is kept too: the memory
the tree really occupies. CPU seconds are counted two ways and the larger is kept:
``getrusage(RUSAGE_CHILDREN)`` around the run (exact for every descendant that was reaped by
its parent) and the last /proc sample of each process (catches orphans reaped by init; may
miss the last sampling interval of a short-lived process).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, int] | None:
    """(ppid, cpu seconds of the process itself, rss bytes) from /proc/<pid>/stat."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # the command name may contain spaces and parentheses: split after the last ')'
    fields = data[data.rindex(b")") + 2 :].split()
    ppid = int(fields[1])
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime
    rss = int(fields[21]) * _PAGE
    return ppid, cpu, rss


def _pss(pid: int) -> int:
    """Proportional set size in bytes (0 when unreadable: gone, or not ours)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far; 0 if it is gone."""
    stat = _stat(pid)
    return stat[1] if stat else 0.0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def role_of(cmdline: str, is_root: bool) -> str:
    """driver | jvm | python_workers | other, from a process's command line."""
    if is_root:
        return "driver"
    program = cmdline.split(" ", 1)[0]
    if program.endswith("java"):
        return "jvm"
    if "python" in os.path.basename(program):
        return "python_workers"  # pyspark.daemon, its forked workers, the data source planner
    return "other"


def label_of(cmdline: str, role: str) -> str:
    """A short name for one process of the tree: its role, and for Spark's Python processes the
    module they run (``pyspark.daemon``, ``pyspark.sql.worker.plan_data_source_read``, ...)."""
    if role != "python_workers":
        return role
    words = cmdline.split()
    if "-m" in words[:-1]:
        module = words[words.index("-m") + 1]
        rest = words[words.index("-m") + 2:]
        # pyspark's daemon serves one worker module (its argument; none: the executors'
        # pyspark.worker), and its forked workers keep its command line
        return f"{module} {rest[0]}" if module == "pyspark.daemon" and rest else module
    scripts = [w for w in words[1:] if not w.startswith("-")]
    return os.path.basename(scripts[0]) if scripts else os.path.basename(words[0] if words else "")


@dataclass
class TreeUsage:
    peak_rss_bytes: int = 0  # the largest sum over the tree in one sample
    peak_rss_by_role: dict[str, int] = field(default_factory=dict)  # role -> largest sum
    peak_pss_bytes: int = 0  # the largest sum of PSS over the tree in one sample
    peak_pss_by_role: dict[str, int] = field(default_factory=dict)
    cpu_seconds: float = 0.0
    cpu_seconds_by_role: dict[str, float] = field(default_factory=dict)
    # label_of -> CPU seconds: the Spark Python processes apart (decode workers forked by
    # pyspark.daemon, the data source's planner, the streaming source runner)
    cpu_seconds_by_label: dict[str, float] = field(default_factory=dict)
    processes: int = 0  # distinct processes seen
    samples: int = 0
    # (seconds since the first sample, rss by role) of every sample: the memory chart
    timeline: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    # pid -> (label, largest rss, seconds since the first sample at first / last sight)
    by_process: dict[int, tuple[str, int, float, float]] = field(default_factory=dict)
    # the processes of the sample with the largest sum: (pid, label, rss), largest first
    at_peak: list[tuple[int, str, int]] = field(default_factory=list)
    # (time.time() of a sample, CPU seconds by role so far: every process seen, gone ones at
    # their last reading): the CPU of a window of the run (``cpu_between``)
    cpu_timeline: list[tuple[float, dict[str, float]]] = field(default_factory=list)

    def cpu_between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds by role from the last sample at or before ``start`` (time.time()) to
        the first at or after ``end`` (a window up to a sample interval wider)."""
        before = [s for s in self.cpu_timeline if s[0] <= start] or self.cpu_timeline[:1]
        after = [s for s in self.cpu_timeline if s[0] >= end] or self.cpu_timeline[-1:]
        if not before or not after:
            return {}
        first, last = before[-1][1], after[0][1]
        return {role: round(cpu - first.get(role, 0.0), 2) for role, cpu in last.items()}

    def timeline_json(self, points: int = 400) -> dict[str, Any]:
        """The RSS over time in MiB, thinned to at most ``points`` samples (every n-th)."""
        mib = 1024 * 1024
        step = max(1, len(self.timeline) // points)
        kept = self.timeline[::step]
        roles = sorted({role for _, by_role in kept for role in by_role})
        return {
            "t_s": [round(t, 2) for t, _ in kept],
            "mib": {role: [round(by_role.get(role, 0) / mib, 1) for _, by_role in kept]
                    for role in roles},
        }

    def to_json(self) -> dict[str, Any]:
        mib = 1024 * 1024
        return {
            "rss_timeline": self.timeline_json(),
            "peak_rss_mib": round(self.peak_rss_bytes / mib, 1),
            "peak_rss_mib_by_role": {k: round(v / mib, 1) for k, v in self.peak_rss_by_role.items()},
            "peak_pss_mib": round(self.peak_pss_bytes / mib, 1),
            "peak_pss_mib_by_role": {k: round(v / mib, 1) for k, v in self.peak_pss_by_role.items()},
            "cpu_seconds": round(self.cpu_seconds, 2),
            "cpu_seconds_by_role": {k: round(v, 2) for k, v in self.cpu_seconds_by_role.items()},
            "cpu_seconds_by_label": {k: round(v, 2) for k, v in self.cpu_seconds_by_label.items()},
            "processes": self.processes,
            "samples": self.samples,
            # who holds the peak, and each process's own peak and lifetime in the run
            "at_peak_mib": [[pid, label, round(rss / mib, 1)] for pid, label, rss in self.at_peak],
            "by_process": [
                {"pid": pid, "process": label, "peak_rss_mib": round(rss / mib, 1),
                 "seen_s": [round(first, 1), round(last, 1)]}
                for pid, (label, rss, first, last) in sorted(self.by_process.items())
            ],
        }


class TreeSampler(threading.Thread):
    """Samples the RSS and CPU of ``root_pid`` and all its descendants every ``interval`` s."""

    def __init__(self, root_pid: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root_pid = root_pid
        self.interval = interval
        self.usage = TreeUsage()
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (role, last cpu seconds)
        self._labels: dict[int, str] = {}  # pid -> label_of (read once its role is known)
        self._halt = threading.Event()
        self._first_sample_at: float | None = None

    def _sample(self) -> None:
        parents: dict[int, int] = {}
        stats: dict[int, tuple[int, float, int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = _stat(int(entry))
            if stat is not None:
                stats[int(entry)] = stat
                parents[int(entry)] = stat[0]
        tree = {self.root_pid} if self.root_pid in stats else set()
        grew = True
        while grew:  # transitive closure of "parent is in the tree"
            grew = False
            for pid, ppid in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        total = pss_total = 0
        by_role: dict[str, int] = {}
        pss_by_role: dict[str, int] = {}
        now = time.monotonic()
        if self._first_sample_at is None:
            self._first_sample_at = now
        since = now - self._first_sample_at
        sample: list[tuple[int, str, int]] = []
        for pid in tree:
            # read every time: Spark's launcher scripts exec() java in the same process; but
            # keep a known role once a process turns zombie (its cmdline reads empty)
            cmdline = _cmdline(pid)
            role = role_of(cmdline, pid == self.root_pid)
            if role == "other" and pid in self._cpu:
                role = self._cpu[pid][0]
            _, cpu, rss = stats[pid]
            if role == "jvm" and cmdline and cmdline == _cmdline(stats[pid][0]):
                # The JVM starts a process (a Python worker) with posix_spawn: until the
                # child execs, it shares the JVM's memory and /proc shows the JVM's RSS for
                # it. Counted, it doubled the JVM in a sample (780 MiB "JVM" peaks).
                rss = 0
            total += rss
            by_role[role] = by_role.get(role, 0) + rss
            pss = _pss(pid)  # shared pages split among their sharers: no double count
            pss_total += pss
            pss_by_role[role] = pss_by_role.get(role, 0) + pss
            self._cpu[pid] = (role, cpu)
            label = label_of(_cmdline(pid), role) if pid not in self._labels else self._labels[pid]
            if role != "other":  # a launcher script becomes java or python: label it again later
                self._labels[pid] = label
            sample.append((pid, label, rss))
            known = self.usage.by_process.get(pid)
            self.usage.by_process[pid] = (label, max(rss, known[1] if known else 0),
                                          known[2] if known else since, since)
        usage = self.usage
        usage.timeline.append((since, by_role))
        cpu_by_role: dict[str, float] = {}
        for role_seen, cpu_seen in self._cpu.values():
            cpu_by_role[role_seen] = cpu_by_role.get(role_seen, 0.0) + cpu_seen
        usage.cpu_timeline.append((time.time(), cpu_by_role))
        usage.samples += 1
        if total > usage.peak_rss_bytes:
            usage.at_peak = sorted(sample, key=lambda entry: -entry[2])
        usage.peak_rss_bytes = max(usage.peak_rss_bytes, total)
        for role, rss in by_role.items():
            usage.peak_rss_by_role[role] = max(usage.peak_rss_by_role.get(role, 0), rss)
        usage.peak_pss_bytes = max(usage.peak_pss_bytes, pss_total)
        for role, pss in pss_by_role.items():
            usage.peak_pss_by_role[role] = max(usage.peak_pss_by_role.get(role, 0), pss)

    def run(self) -> None:
        while not self._halt.is_set():
            self._sample()
            self._halt.wait(self.interval)

    def finish(self) -> TreeUsage:
        self._halt.set()
        self.join(timeout=5)
        by_role: dict[str, float] = {}
        for role, cpu in self._cpu.values():
            by_role[role] = by_role.get(role, 0.0) + cpu
        self.usage.cpu_seconds_by_role = by_role
        by_label: dict[str, float] = {}
        for pid, (role, cpu) in self._cpu.items():
            label = self._labels.get(pid, role)
            by_label[label] = by_label.get(label, 0.0) + cpu
        self.usage.cpu_seconds_by_label = by_label
        self.usage.cpu_seconds = sum(by_role.values())
        self.usage.processes = len(self._cpu)
        return self.usage


@dataclass
class LoggedLine:
    at: float  # time.time() when the line was read (the pipe adds well under a millisecond)
    text: str
    data: dict[str, Any] | None  # the JSON object, for JSON lines


@dataclass
class RunOutcome:
    returncode: int
    wall_seconds: float
    started_at: float  # time.time() at launch
    lines: list[LoggedLine]
    stdout: str
    usage: TreeUsage

    def json_lines(self) -> list[LoggedLine]:
        return [line for line in self.lines if line.data is not None]

    def tail(self, count: int = 15) -> str:
        return "\n".join(line.text for line in self.lines[-count:])

    def error_lines(self, limit: int = 12) -> list[str]:
        """Distinct stderr lines naming an error or exception (the cause, not the traceback
        frames): e.g. a JVM ``java.lang.OutOfMemoryError`` far above the Python traceback."""
        found: list[str] = []
        for line in self.lines:
            text = line.text.strip(" │")
            if ("Error" in text or "Exception" in text or "Killed" in text) and text not in found:
                found.append(text[:300])
        return found[:limit]


class MonitoredProcess:
    """A subprocess whose stderr lines are timestamped as they arrive and whose tree is sampled.

    ``on_line`` is called from the reader thread for every stderr line.
    """

    def __init__(self, command: Sequence[str], *, env: dict[str, str] | None = None,
                 cwd: str | None = None, on_line: Callable[[LoggedLine], None] | None = None,
                 interval: float = 0.2) -> None:
        self.command = list(command)
        self.lines: list[LoggedLine] = []
        self._on_line = on_line
        self._children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.started_at = time.time()
        self._started = time.perf_counter()
        self.process = subprocess.Popen(
            self.command, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1,
        )
        self.sampler = TreeSampler(self.process.pid, interval)
        self.sampler.start()
        self._stdout: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for text in self.process.stderr:
            at = time.time()
            text = text.rstrip("\n")
            data = None
            if text.startswith("{"):
                try:
                    data = json.loads(text)
                except ValueError:
                    data = None
            line = LoggedLine(at, text, data)
            self.lines.append(line)
            if self._on_line is not None:
                self._on_line(line)

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for text in self.process.stdout:
            self._stdout.append(text)

    def terminate(self) -> None:
        """SIGTERM: replicator finishes the batch in progress and stops."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout: float | None = None) -> RunOutcome:
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        wall = time.perf_counter() - self._started
        for reader in self._readers:
            reader.join(timeout=5)
        usage = self.sampler.finish()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        reaped = (after.ru_utime - self._children_before.ru_utime
                  + after.ru_stime - self._children_before.ru_stime)
        usage.cpu_seconds = max(usage.cpu_seconds, reaped)
        return RunOutcome(self.process.returncode, wall, self.started_at, self.lines,
                          "".join(self._stdout), usage)


def run_monitored(command: Sequence[str], *, env: dict[str, str] | None = None,
                  cwd: str | None = None, timeout: float | None = None) -> RunOutcome:
    return MonitoredProcess(command, env=env, cwd=cwd).wait(timeout)
