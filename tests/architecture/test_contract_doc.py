"""docs/contract.md's finding catalogue is generated from data/catalogue.py, and the rules emit only what it lists.

Run with GPUTRIAGE_UPDATE_DOCS=1 to rewrite the generated part of the page after changing the catalogue.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from gputriage.data.catalogue import BY_CODE, CATALOGUE, COMMON_EVIDENCE

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "docs" / "contract.md"
RULES = ROOT / "src" / "gputriage" / "rules"
START, END = "<!-- catalogue: generated from src/gputriage/data/catalogue.py -->", "<!-- catalogue: end -->"
UPDATE_DOCS_ENV = "GPUTRIAGE_UPDATE_DOCS"


def catalogue_markdown() -> str:
    rows = ["| code | rung | severities | meaning | evidence fields |", "|---|---|---|---|---|"]
    for e in CATALOGUE:
        fields = ", ".join(f"`{name}`" for name in e.evidence)
        rows.append(f"| `{e.code}` | {e.rung} | {', '.join(e.severities)} | {e.meaning} | {fields} |")
    common = ", ".join(f"`{name}`" for name in COMMON_EVIDENCE)
    rows += ["", f"Any finding may also carry the evidence the diagnosis adds: {common}."]
    return "\n".join(rows)


def test_the_contract_page_shows_the_catalogue() -> None:
    page = CONTRACT.read_text()
    head, rest = page.split(START + "\n", 1)
    _, tail = rest.split(END, 1)
    expected = f"{head}{START}\n{catalogue_markdown()}\n{END}{tail}"
    if os.environ.get(UPDATE_DOCS_ENV):
        CONTRACT.write_text(expected)
    assert page == expected, f"docs/contract.md is stale: run {UPDATE_DOCS_ENV}=1 pytest {Path(__file__).name}"


def _finding_calls() -> list[tuple[str, str, int | None]]:
    """(file, code, rung or None) of every call that makes a finding in rules/: `Finding(code=...)`, or a helper
    named `..._finding(run, "code", ...)`; the code is the first string literal among the arguments."""
    found = []
    for path in sorted(RULES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not _makes_finding(node.func):
                continue
            kwargs = {k.arg: k.value for k in node.keywords}
            code = kwargs.get("code")
            if code is None:
                code = next((a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)
            if not isinstance(code, ast.Constant) or not isinstance(code.value, str):
                continue
            rung = kwargs.get("rung")
            value = rung.value if isinstance(rung, ast.Constant) and isinstance(rung.value, int) else None
            found.append((path.name, code.value, value))
    return found


def _makes_finding(func: ast.expr) -> bool:
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name == "Finding" or name.endswith("_finding")


def test_every_code_a_rule_writes_is_in_the_catalogue_with_its_rung() -> None:
    calls = _finding_calls()
    assert len(calls) >= len(CATALOGUE)  # the scan sees the rules' findings
    unknown = [(f, c) for f, c, _ in calls if c not in BY_CODE]
    assert unknown == []
    wrong_rung = [(f, c, r) for f, c, r in calls if r is not None and r != BY_CODE[c].rung]
    assert wrong_rung == []


def test_every_catalogued_code_is_written_by_some_rule() -> None:
    source = "\n".join(p.read_text() for p in RULES.glob("*.py"))
    assert [e.code for e in CATALOGUE if f'"{e.code}"' not in source] == []
