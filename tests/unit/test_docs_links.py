"""Relative links in README.md and docs/**/*.md point at files (and headings) that exist.

A renamed file or heading otherwise leaves a dead link that nobody notices until a user
clicks it. Anchors are computed the way GitHub does: lower case, punctuation dropped,
spaces to dashes, ``-1``, ``-2`` ... for repeated headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
FENCED = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)

# Linked before they are written: expected failures until the file exists, then a failure
# that asks for the entry to be removed (so the list cannot outlive its reason).
NOT_WRITTEN_YET: dict[str, str] = {}  # relative path -> why a linked page is still missing


def anchors(markdown: str) -> set[str]:
    found: set[str] = set()
    for heading in HEADING.findall(FENCED.sub("", markdown)):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
        anchor = text.replace(" ", "-")
        candidate, number = anchor, 0
        while candidate in found:
            number += 1
            candidate = f"{anchor}-{number}"
        found.add(candidate)
    return found


def links() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for document in DOCUMENTS:
        text = FENCED.sub("", document.read_text(encoding="utf-8"))
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            found.append((str(document.relative_to(ROOT)), target))
    return found


LINKS = links()


def test_anchor_rules_match_github() -> None:
    assert anchors("## `tables[].columns.<source column>`\n") == {"tablescolumnssource-column"}
    assert anchors("# A b\n## A b\n") == {"a-b", "a-b-1"}
    assert len(LINKS) > 20  # the documents do link to each other


@pytest.mark.parametrize("document,target", LINKS, ids=[f"{d}->{t}" for d, t in LINKS])
def test_relative_link_resolves(document: str, target: str) -> None:
    path_part, _, anchor = target.partition("#")
    source = ROOT / document
    resolved = (source.parent / path_part).resolve() if path_part else source
    relative = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else ""
    if relative in NOT_WRITTEN_YET:
        assert not resolved.exists(), f"{relative} exists now: remove it from NOT_WRITTEN_YET"
        pytest.xfail(f"{relative}: {NOT_WRITTEN_YET[relative]}")
    assert resolved.exists(), f"{document}: link to {target}: {resolved} does not exist"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved.read_text(encoding="utf-8")), (
            f"{document}: link to {target}: no heading with anchor #{anchor} in {relative}"
        )
