"""Settings of the job that slow the GPU: CUDA_LAUNCH_BLOCKING, and cuDNN's autotuner and determinism flags.

With CUDA_LAUNCH_BLOCKING=1 every kernel launch returns only once the kernel has finished, so the host cannot queue
work ahead and the GPU idles between kernels (causes.md F.17: scripts that set it at their top, for a crash that was
long fixed). It is read from the job's own environment while the probes are in. Where the job set it itself (it
differs from what the process started with), the statement of the user's code that sets it is looked up, parsed (a
mention in a docstring is not one): the main script first, then the user's other loaded modules. Files are read at
most MAX_FILE_BYTES each; nothing raises. cuDNN's flags are read the same way when convolutions ran (CudnnFlags).
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
from collections.abc import Callable
from pathlib import Path

from gputriage.collectors.usercode import is_user_file, short_path
from gputriage.record.compute import ComputeSection

LAUNCH_BLOCKING = "CUDA_LAUNCH_BLOCKING"
MAX_FILE_BYTES = 1_000_000
MAX_FILES = 64
MAX_VALUE_CHARS = 40


class LaunchBlocking:
    """The value the process started with, compared at the census window's end."""

    def __init__(self) -> None:
        self.at_start = started_with(LAUNCH_BLOCKING)

    def fill(self, section: ComputeSection) -> None:
        value = os.environ.get(LAUNCH_BLOCKING)
        if value is None:
            return
        section.launch_blocking = value[:MAX_VALUE_CHARS]
        section.launch_blocking_set_by = "job" if value != self.at_start else "environment"
        if value != self.at_start:
            section.launch_blocking_where = setting_line()


def started_with(name: str) -> str | None:
    """The variable as the process started with it: /proc/self/environ (Linux) holds the environment the process was
    given, whatever the job set since; the probes start at the job's `import torch`, after the lines that set it at a
    script's top. Elsewhere, the value now."""
    with contextlib.suppress(OSError):
        prefix = name.encode() + b"="
        for entry in Path("/proc/self/environ").read_bytes().split(b"\0"):
            if entry.startswith(prefix):
                return entry[len(prefix) :].decode(errors="replace")
        return None
    return os.environ.get(name)


def setting_line() -> str | None:
    """file:line of the first statement of the user's code that sets CUDA_LAUNCH_BLOCKING, or None."""
    return first_statement(LAUNCH_BLOCKING, _first_setting)


def first_statement(needle: str, find: Callable[[ast.Module], int | None]) -> str | None:
    """file:line of the first statement `find` finds in the user's files that mention `needle` (the main script
    first), or None."""
    for path in _user_files():
        with contextlib.suppress(OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
            if needle not in text:
                continue
            line = find(ast.parse(text))
            if line is not None:
                return f"{short_path(str(path))}:{line}"
    return None


class CudnnFlags:
    """cuDNN's autotuner and determinism settings as the job ran its steps (causes.md J.27-28), and the user's line
    that set them, where one did. torch is imported only when the section is filled (the job has imported it)."""

    def fill(self, section: ComputeSection) -> None:
        if not section.conv_calls:
            return
        with contextlib.suppress(Exception):  # never break the job for a setting
            import torch

            benchmark = bool(torch.backends.cudnn.benchmark)
            deterministic = bool(torch.backends.cudnn.deterministic or torch.are_deterministic_algorithms_enabled())
            section.cudnn_benchmark, section.cudnn_deterministic = benchmark, deterministic
            # the line that set what differs from torch's defaults (benchmark and determinism off): a default has
            # no line, and a statement in a branch that did not run is not the one
            if deterministic:
                section.cudnn_set_where = first_statement(
                    "cudnn", _sets_cudnn("deterministic", True)
                ) or first_statement("use_deterministic_algorithms", _sets_cudnn("use_deterministic_algorithms", True))
            elif benchmark:
                section.cudnn_set_where = first_statement("cudnn", _sets_cudnn("benchmark", True))


def _sets_cudnn(attr: str, value: bool) -> Callable[[ast.Module], int | None]:
    """A finder of the first `<...>.cudnn.<attr> = <value>` (any spelling of the module), or of
    `torch.use_deterministic_algorithms(<value>)` for that name."""

    def find(tree: ast.Module) -> int | None:
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is value:
                for t in node.targets:
                    if isinstance(t, ast.Attribute) and t.attr == attr and ast.unparse(t.value).endswith("cudnn"):
                        found.append(node.lineno)
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(attr) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and first.value is value:
                    found.append(node.lineno)
        return min(found) if found else None

    return find


def _first_setting(tree: ast.Module) -> int | None:
    """The line of `os.environ["CUDA_LAUNCH_BLOCKING"] = ...`, `os.environ.setdefault("CUDA_LAUNCH_BLOCKING", ...)`,
    `os.putenv("CUDA_LAUNCH_BLOCKING", ...)` or `os.environ.update({"CUDA_LAUNCH_BLOCKING": ...})`; not a mention in
    a docstring or a comment."""
    found = [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Assign, ast.Call)) and _sets(node)]
    return min(found) if found else None


def _sets(node: ast.AST) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Subscript) and _names_it(t.slice) for t in node.targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr in ("setdefault", "putenv") and node.args:
            return _names_it(node.args[0])
        if node.func.attr == "update" and node.args and isinstance(node.args[0], ast.Dict):
            return any(key is not None and _names_it(key) for key in node.args[0].keys)
        if node.func.attr == "update":
            return any(kw.arg == LAUNCH_BLOCKING for kw in node.keywords)
    return False


def _names_it(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == LAUNCH_BLOCKING


def _user_files() -> list[Path]:
    """The main script, then the user's other loaded modules, each once, at most MAX_FILES."""
    found: list[Path] = []
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    candidates = [main] + [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    for name in candidates:
        if not isinstance(name, str) or not name.endswith(".py") or not is_user_file(name):
            continue
        path = Path(name)
        if path not in found:
            found.append(path)
        if len(found) >= MAX_FILES:
            break
    return found
