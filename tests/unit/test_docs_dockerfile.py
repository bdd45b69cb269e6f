"""The Dockerfile, read: what it copies exists, it installs every runtime extra under the
pinned constraints, and it runs as a numeric non-root user. (Docker cannot run here; hadolint
checks the rest, see the report of issue 10.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
CONSTRAINTS_PATH = ROOT / "docker" / "constraints.txt"
REGENERATE = ".venv/bin/python scripts/docker-constraints"
# all: a shorthand; dev: the test tools; bench: the peers bench/run measures (Debezium).
NOT_IN_THE_IMAGE = {"all", "dev", "bench"}


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


INSTRUCTIONS = _instructions()


def _constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in CONSTRAINTS_PATH.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, separator, version = line.partition("==")
            assert separator and version.strip(), f"not pinned with ==: {line!r}"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_copied_sources_exist() -> None:
    copies = [arguments.split()[:-1] for keyword, arguments in INSTRUCTIONS if keyword == "COPY"]
    assert copies
    for sources in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_installs_every_runtime_extra_under_the_constraints() -> None:
    runs = " ".join(arguments for keyword, arguments in INSTRUCTIONS if keyword == "RUN")
    installed = re.search(r'--constraint docker/constraints\.txt\s+"?\.\[([a-z,]+)\]"?', runs)
    assert installed, "the dependency install must use --constraint docker/constraints.txt"
    runtime_extras = set(PYPROJECT["project"]["optional-dependencies"]) - NOT_IN_THE_IMAGE
    assert set(installed.group(1).split(",")) == runtime_extras
    assert any(k == "COPY" and "docker/constraints.txt" in a for k, a in INSTRUCTIONS)


def test_constraints_pin_every_declared_dependency_within_its_range() -> None:
    pins = _constraints()
    declared = [*PYPROJECT["project"]["dependencies"]]
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        if extra not in NOT_IN_THE_IMAGE:
            declared += requirements
    for line in declared:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in docker/constraints.txt; run {REGENERATE}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"docker/constraints.txt pins {name}=={pins[name]}, outside {line!r}; run {REGENERATE}"
        )


def test_runs_as_a_numeric_non_root_user_with_replicator_as_entrypoint() -> None:
    users = [arguments for keyword, arguments in INSTRUCTIONS if keyword == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]), users
    assert ("ENTRYPOINT", '["replicator"]') in INSTRUCTIONS
    java_home = re.search(r"JAVA_HOME=(\S+)", DOCKERFILE)
    assert java_home and "amd64" not in java_home.group(1)  # one path on every architecture


def test_the_package_install_builds_the_compiled_decoder() -> None:
    """setup.py is copied before the package's install, a compiler is there for it, and the
    build checks that the extension imports (source.fast.native: else the Python decoder)."""
    steps = [(keyword, arguments) for keyword, arguments in INSTRUCTIONS]
    copy = steps.index(("COPY", "setup.py ./"))
    install = next(i for i, (keyword, arguments) in enumerate(steps)
                   if keyword == "RUN" and "--no-deps ." in arguments)
    assert copy < install
    run = steps[install][1]
    assert run.index("gcc") < run.index("--no-deps .") < run.index(
        "import replicator.source.fast.compiled")
