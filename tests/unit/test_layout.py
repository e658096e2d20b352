"""The README's layout section names every module of the package, and names none that is not there."""

from __future__ import annotations

import re

from tests.conftest import ROOT

PACKAGE = ROOT / "orchestrator"
DESCRIBED_AS_A_WHOLE = {"agents", "testing"}
"""Subpackages the layout describes by what they hold rather than module by module."""


def layout() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Layout"):]
    return section[section.index("```") + 3:section.index("```", section.index("```") + 3)]


def test_every_module_is_named_in_the_readme_layout():
    block = layout()
    missing = []
    for module in sorted(PACKAGE.rglob("*.py")):
        rel = module.relative_to(PACKAGE)
        if module.name == "__init__.py" or rel.parts[0] in DESCRIBED_AS_A_WHOLE or "grader_tools" in rel.parts:
            continue
        if not re.search(rf"\b{re.escape(module.stem)}\b", block):
            missing.append(str(rel))
    assert not missing, f"README layout does not name: {missing}"


def test_every_module_the_layout_names_exists():
    names = set(re.findall(r"\b([a-z_]+)\.py\b", layout()))
    present = {p.stem for p in PACKAGE.rglob("*.py")}
    assert names <= present, f"README layout names modules that do not exist: {sorted(names - present)}"
