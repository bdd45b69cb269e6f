"""``${VAR}`` interpolation inside string values, with the offset of every bad reference.

Forms (the shell's, as docker compose reads them):

- ``${VAR}``: the value of VAR; unset is an error (R010) — an empty value is fine.
- ``${VAR:-default}`` / ``${VAR-default}``: the default when VAR is unset or empty / unset.
  The default may itself hold references: ``${A:-${B:-x}}``.
- ``${VAR:?message}`` / ``${VAR?message}``: an error carrying ``message`` when VAR is unset
  or empty / unset (R011).
- ``$$``: a literal ``$``. A ``$`` followed by anything else is kept as it is.

Errors are collected, never raised, so ``validate`` reports every one of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class InterpolationProblem:
    offset: int  # index of the ``$`` of the reference in the original text
    code: str
    message: str
    hint: str | None = None


@dataclass
class Interpolated:
    value: str
    references: int = 0  # how many ${...} were substituted (a literal secret has 0)
    problems: list[InterpolationProblem] = field(default_factory=list)


def _closing_brace(text: str, start: int) -> int:
    """Index of the ``}`` closing the ``${`` whose body starts at ``start``; -1 if none."""
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def interpolate(text: str, environ: Mapping[str, str], *, base_offset: int = 0) -> Interpolated:
    result = Interpolated(value="")
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$":
            out.append(char)
            i += 1
            continue
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if not text.startswith("${", i):
            out.append("$")
            i += 1
            continue
        end = _closing_brace(text, i + 2)
        offset = base_offset + i
        if end < 0:
            result.problems.append(InterpolationProblem(
                offset, "R012", f"unclosed reference {text[i:]!r}",
                "close it with '}', or write $$ for a literal $",
            ))
            out.append(text[i:])
            break
        body = text[i + 2 : end]
        out.append(_substitute(body, environ, offset, result))
        i = end + 1
    result.value = "".join(out)
    return result


def _substitute(body: str, environ: Mapping[str, str], offset: int, result: Interpolated) -> str:
    match = _NAME.match(body)
    if not match:
        result.problems.append(InterpolationProblem(
            offset, "R012", f"bad reference '${{{body}}}': expected a variable name",
            "write ${NAME}, ${NAME:-default} or ${NAME:?message}; $$ is a literal $",
        ))
        return ""
    name = match.group(0)
    rest = body[match.end():]
    value = environ.get(name)
    result.references += 1
    if rest == "":
        if value is None:
            result.problems.append(InterpolationProblem(
                offset, "R010", f"environment variable {name} is not set",
                f"export {name}=..., or give a default: ${{{name}:-value}}",
            ))
            return ""
        return value
    for operator in (":-", "-", ":?", "?"):
        if rest.startswith(operator):
            argument = rest[len(operator):]
            break
    else:
        result.problems.append(InterpolationProblem(
            offset, "R012", f"bad reference '${{{body}}}': unexpected {rest!r} after {name}",
            "write ${NAME}, ${NAME:-default} or ${NAME:?message}",
        ))
        return ""
    missing = value is None or (operator.startswith(":") and value == "")
    if not missing:
        return value or ""
    if operator.endswith("-"):
        # The default is interpolated too; its offset is inside this reference.
        nested = interpolate(
            argument, environ, base_offset=offset + 2 + len(name) + len(operator)
        )
        result.references += nested.references
        result.problems.extend(nested.problems)
        return nested.value
    message = argument or f"{name} must be set"
    result.problems.append(InterpolationProblem(
        offset, "R011", f"{name}: {message}",
        f"export {name}=... before running replicator",
    ))
    return ""
