"""The layers of the pipeline, enforced: collectors -> record -> rules -> diagnosis -> report, commands on top.

Every module's imports (at module level and inside functions alike) are read with `ast` and checked against the
allowed edges below: between gputriage's own layers, and for the third-party packages that only one layer may use.
There are no import circles between modules, and no arrow runs back up. docs/architecture.md explains the layers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "gputriage"

# Layer of each module, by the first matching prefix of its dotted name (longest prefixes first).
LAYER_OF = {
    "gputriage": "facade",  # the package itself: `gputriage.session` and `%load_ext gputriage`, resolved lazily
    "gputriage.__main__": "facade",
    "gputriage.launch": "facade",
    "gputriage.errors": "base",
    "gputriage.version": "base",
    "gputriage.findings": "base",
    "gputriage.wording": "base",
    "gputriage.textsafe": "base",
    "gputriage.outdir": "base",
    "gputriage.envnames": "base",
    "gputriage.cyclegc": "base",
    "gputriage.heap": "base",
    "gputriage.blas": "base",
    "gputriage.stdlib": "base",
    "gputriage.recursion": "base",
    "gputriage.data": "base",
    "gputriage.record": "record",
    "gputriage.hardware": "hardware",
    "gputriage.tracing": "collectors",  # the trace reader collects evidence from a file, like the env-text parser
    "gputriage.collectors": "collectors",
    "gputriage.rules": "rules",
    "gputriage.diagnosis": "diagnosis",
    "gputriage.compare": "compare",
    "gputriage.report": "report",
    "gputriage.api": "api",
    "gputriage.integrations": "integrations",
    "gputriage.commands": "commands",
    "gputriage.cli": "commands",
    "gputriage.demo": "demo",
}

# Which layers each layer may import (itself included where listed). Everything points down the pipeline.
ALLOWED = {
    "base": {"base"},
    "record": {"base", "record"},
    "hardware": {"base", "record", "hardware"},
    "collectors": {"base", "record", "hardware", "collectors"},
    "rules": {"base", "record", "rules"},
    "diagnosis": {"base", "record", "rules", "diagnosis"},
    "compare": {"base", "record", "diagnosis", "compare"},
    "report": {"base", "record", "diagnosis", "compare", "report"},
    "api": {"base", "record", "collectors", "diagnosis", "report"},
    "integrations": {"base", "record", "collectors", "diagnosis", "report", "api", "integrations"},
    "commands": {
        "base",
        "record",
        "hardware",
        "collectors",
        "rules",
        "diagnosis",
        "compare",
        "report",
        "commands",
        "demo",
    },
    "facade": {"base", "facade", "api", "integrations", "commands"},
    "demo": set(),  # the bundled job plays the user's code: it knows nothing of gputriage
}
# Single modules that a layer above may use although their layer is not allowed as a whole.
ALLOWED_MODULES = {
    # CUDA_VISIBLE_DEVICES parsing: pure, no NVML; the rung-1 rules map the driver's GPUs through it.
    ("rules", "gputriage.hardware.visible"),
}

# Third-party packages and the only places that may import them.
THIRD_PARTY = {
    "torch": ("gputriage.collectors", "gputriage.integrations", "gputriage.demo"),
    "pynvml": ("gputriage.hardware.nvml",),
    "rich": ("gputriage.report",),
    "jinja2": ("gputriage.report",),
    "IPython": ("gputriage.integrations.notebook",),
    "lightning": ("gputriage.integrations.lightning",),
    "pytorch_lightning": ("gputriage.integrations.lightning",),
    "transformers": ("gputriage.integrations.hf",),
    # Records and every other class of data are msgspec Structs: Python 3.11 writes and compiles three to five
    # methods for each dataclass at import, which took a third of a command's start-up (123 classes: 54-76 ms).
    "dataclasses": (),
}
# Modules of the collectors layer that must not import torch at module level: `gputriage run` imports them before the
# user's code, and `import gputriage` must stay cheap.
TORCH_FREE_AT_IMPORT = ("gputriage.collectors.session", "gputriage.collectors.runner", "gputriage.collectors.usercode")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer(module: str) -> str:
    best = max((p for p in LAYER_OF if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF[best]


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(imported module, at module level?) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        at_top = id(node) in top_level
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, at_top
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                # `from gputriage.rules import env` imports a module; `from gputriage.record import Run` a name.
                yield (full if _is_module(full) else base), at_top


def _is_module(dotted: str) -> bool:
    rel = Path(*dotted.split("."))
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def own_edges() -> dict[str, set[str]]:
    modules = all_modules()
    return {
        name: {imp for imp, _ in imports(path) if imp.split(".")[0] == "gputriage" and imp != name}
        for name, path in modules.items()
    }


def test_every_module_has_a_layer() -> None:
    for name in all_modules():
        assert layer(name) in ALLOWED, name


def test_no_arrow_runs_back_up() -> None:
    wrong = []
    for name, targets in own_edges().items():
        mine = layer(name)
        for target in targets:
            if layer(target) not in ALLOWED[mine] and (mine, target) not in ALLOWED_MODULES:
                wrong.append(f"{name} ({mine}) imports {target} ({layer(target)})")
    assert wrong == []


def test_third_party_packages_stay_in_their_layer() -> None:
    wrong = []
    for name, path in all_modules().items():
        for imported, _ in imports(path):
            top = imported.split(".")[0]
            places = THIRD_PARTY.get(top)
            if places is not None and not any(name == p or name.startswith(p + ".") for p in places):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


@pytest.mark.parametrize("module", TORCH_FREE_AT_IMPORT)
def test_modules_loaded_before_the_users_code_do_not_import_torch(module: str) -> None:
    path = all_modules()[module]
    assert [imp for imp, at_top in imports(path) if at_top and imp.split(".")[0] == "torch"] == []


def test_no_import_circles() -> None:
    graph = own_edges()
    circles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert circles == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative-enough for a package of a few hundred modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checker_sees_a_planted_back_arrow(tmp_path: Path) -> None:
    # The checks above must be able to fail: a rule that imports the report layer is caught.
    planted = PACKAGE / "rules" / "_planted_for_test.py"
    planted.write_text("from gputriage.report import terminal\n")
    try:
        wrong = [t for t in own_edges()["gputriage.rules._planted_for_test"] if layer(t) not in ALLOWED["rules"]]
        assert wrong == ["gputriage.report.terminal"]
    finally:
        planted.unlink()
