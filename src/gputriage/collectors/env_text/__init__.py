"""Parse a pasted text (an issue-tracker report) into the same Environment that the probe fills.

People paste prose, REPL sessions, `python -c` outputs, collect_env, nvidia-smi in every form, pip / conda / uv logs,
docker and compose lines, dmesg, tracebacks and warnings in any order, with replies that suggest commands. The text is
split into lines marked fact or suggestion (`lines.py`); one extractor per kind of text reads the facts
(collect_env, nvidia-smi, sessions, packages, messages, system, commands), most reliable first; `derive.py` then
draws what follows (the build's CUDA from its version, the PyPI wheel of a plain `pip install`). What the text does
not say stays None and is listed in `Environment.unknown`; the verdict then says which command's output to paste
next (rules/env_facts.py `rung_one_gap`). Every pattern runs on one bounded line at a time: parsing is linear in the
size of the paste.
"""

from __future__ import annotations

from collections.abc import Callable

from gputriage.collectors.env_text import collect_env, commands, macos, messages, packages, sessions, smi, system
from gputriage.collectors.env_text.derive import derive_build, has_any_fact, unknown_facts
from gputriage.collectors.env_text.limits import MAX_LINES
from gputriage.collectors.env_text.lines import split_paste
from gputriage.collectors.env_text.messages import apply_torch_warnings, cuda_error_code
from gputriage.collectors.env_text.system import python_from_paths
from gputriage.errors import InputError
from gputriage.record.environment import Environment

_BINARY_CONTROL_SHARE = 0.05  # more than 5% control characters is not a pasted report
_PASTE_HINT = "paste the output of `python -m torch.utils.collect_env` and `nvidia-smi`"

_EXTRACTORS: tuple[Callable[..., None], ...] = (
    collect_env.extract,
    smi.extract,
    sessions.extract,
    packages.extract,
    messages.extract,
    system.extract,
    macos.extract,
    commands.extract,
    commands.interpreter,
    sessions.prose_version,  # last: every other source of the version wins
)


def parse_environment_text(text: str) -> Environment:
    """Parse a pasted report into an Environment (source "text").

    Raises:
        InputError: the text is empty, binary, or holds no fact about PyTorch, CUDA, the driver or the GPU.
    """
    if not text.strip():
        raise InputError(f"the text is empty: {_PASTE_HINT}")
    if _looks_binary(text):
        raise InputError("the input looks binary, not text: give a collect_env / nvidia-smi text file")
    env = Environment(source="text")
    env.torch.probe_mode = "text"
    paste = split_paste(text)
    for extract in _EXTRACTORS:
        extract(paste, env)
    python_from_paths(text, env)
    derive_build(env)
    if not has_any_fact(env):
        read = f" (only its first {MAX_LINES:,} lines are read)" if len(paste.lines) >= MAX_LINES else ""
        raise InputError(f"found no PyTorch, CUDA or nvidia-smi facts in the text{read}: {_PASTE_HINT}")
    env.unknown = unknown_facts(env)
    return env


def _looks_binary(text: str) -> bool:
    if "\x00" in text:
        return True
    sample = text[:65536]
    control = sum(1 for ch in sample if (ord(ch) < 32 and ch not in "\t\n\r\f\x1b") or ch == "\ufffd")
    return control / len(sample) > _BINARY_CONTROL_SHARE


__all__ = ["apply_torch_warnings", "cuda_error_code", "parse_environment_text", "unknown_facts"]
