"""Semantic versions: ``MAJOR.MINOR.PATCH[-PRERELEASE]``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering
from typing import Tuple

_PATTERN = re.compile(
    r"v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
)


@total_ordering
@dataclass(frozen=True)
class Version:
    """A parsed version; compares by precedence."""

    major: int
    minor: int
    patch: int
    pre: Tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        return f"{text}-{'.'.join(self.pre)}" if self.pre else text

    @property
    def is_prerelease(self) -> bool:
        return bool(self.pre)

    def _key(self) -> tuple:
        # Semantic Versioning 2.0.0, section 11: a pre-release has lower
        # precedence than the release; its identifiers compare one by one,
        # numeric ones numerically and below alphanumeric ones, and a shorter
        # list of otherwise equal identifiers comes first.
        if not self.pre:
            return (self.major, self.minor, self.patch, 1, ())
        identifiers = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0, identifiers)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()


def parse(text: str) -> Version:
    """Parse ``"1.4.0"``, ``"v2.0.0-rc.1"``...; ``ValueError`` for anything else."""
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not a semantic version: {text!r}")
    pre = tuple(match["pre"].split(".")) if match["pre"] else ()
    return Version(int(match["major"]), int(match["minor"]), int(match["patch"]), pre)


def bump(version: Version, part: str) -> Version:
    """The next ``"major"``, ``"minor"`` or ``"patch"`` release after ``version``."""
    if part == "major":
        return Version(version.major + 1, 0, 0)
    if part == "minor":
        return Version(version.major, version.minor + 1, 0)
    if part == "patch":
        if version.pre:
            return Version(version.major, version.minor, version.patch)
        return Version(version.major, version.minor, version.patch + 1)
    raise ValueError(f"part must be major, minor or patch, got {part!r}")
