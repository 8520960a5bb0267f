"""Commands and settings the user's job runs with: CUDA_VISIBLE_DEVICES and friends (shell, `export`, Windows `set`,
`os.environ[...]`, `%env`, compose `environment:`), and how a container was started (`docker run` with or without
`--gpus`, nvidia-docker, compose `deploy.resources` / `runtime: nvidia`, Kubernetes `nvidia.com/gpu` limits).

A suggested setting is not the user's ("maybe try CUDA_VISIBLE_DEVICES=1"), except where the sentence points at the
user's own line: "remove the line os.environ[...] = '1'", "change X to Y" (X is theirs, Y is the suggestion).
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import first
from gputriage.collectors.env_text.limits import cap
from gputriage.collectors.env_text.lines import Line, Paste
from gputriage.record.environment import Environment

ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_ORDER")
_ASSIGN = re.compile(
    r"\b(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|CUDA_LAUNCH_BLOCKING|CUDA_DEVICE_ORDER)"
    # a list's commas ("0,1,2,3") are the value's; a comma before a space ends it ("=0, and then")
    r"(?:[ \t]*=[ \t]*|:[ \t]+|[ \t]+(?=[0-9\"'-]))(\"[^\"\n]{0,120}\"|'[^'\n]{0,120}'|(?:[^\s;`,)]|,(?=\w)){0,120})"
)
_ENVIRON = re.compile(
    r"os\.environ\[[\"'](CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES)[\"']\][ \t]*=[ \t]*[\"']([^\"']{0,120})[\"']"
)
_POINTS_AT_OWN = re.compile(
    r"\b(?:remove|removing|delete|deleting|comment(?:ed|ing)? out|change|changing|replace|replacing|drop|unless|"
    r"had|has|sets|set to|from the)\b",
    re.IGNORECASE,
)
_ADVICE = re.compile(r"\b(?:consider|try)[ \t]+(?:passing|setting|using)[ \t]*$", re.IGNORECASE)
_POINT_WORDS = ("remov", "delet", "comment", "chang", "replac", "drop", "unless", "had", "has", "set", "from the")
# A command that runs a Python by its path (ComfyUI portable's `.\python_embeded\python.exe -s main.py`, a venv's
# `./venv/bin/python train.py`): the interpreter the job uses, which a fix's `python -m pip` must be.
_INTERPRETER = re.compile(
    r"^[ \t]*((?:\.{1,2}[\\/]|[A-Za-z]:[\\/]|/|~/)[^\s\"'<>|&;]{0,200}?[\\/]python(?:3(?:\.[0-9]{1,2})?)?(?:\.exe)?)"
    r"(?=[ \t]+(?:-[a-zA-Z]|\S+\.py\b))",
    re.IGNORECASE,
)
# A script's own print of sys.executable ("Python executable:  G:\\App\\pylibs_win\\python.exe").
_EXECUTABLE = re.compile(
    r"^[ \t]*python executable[ \t]*:[ \t]*((?:[A-Za-z]:[\\/]|/)[^\s\"'<>|&;]{0,200}?[\\/]python(?:3(?:\.[0-9]{1,2})?)?"
    r"(?:\.exe)?)[ \t]*$",
    re.IGNORECASE,
)
_WINDOWS_SITE = re.compile(r"\b([A-Za-z]:\\[^\s\"'<>|:*?]{1,200}?)\\Lib\\site-packages\\torch\b", re.IGNORECASE)
_RUN = re.compile(r"\b(nvidia-docker|docker|podman)[ \t]+(?:container[ \t]+)?run\b")
_GPU_FLAG = re.compile(r"--gpus\b|--runtime[= ]nvidia|--device[= ]\S{0,40}nvidia|NV_GPU=")


def extract(paste: Paste, env: Environment) -> None:
    previous_points = False
    values: dict[str, set[str]] = {}
    for line in paste.lines:
        points = any(word in line.low for word in _POINT_WORDS) and bool(_POINTS_AT_OWN.search(line.text))
        if not any(name.lower() in line.low for name in ENV_NAMES):
            previous_points = (
                points
                or (previous_points and not line.text.strip())
                or (previous_points and line.text.lstrip().startswith(("```", "~~~")))
            )
            continue
        if line.fact or points or previous_points:
            _settings(line, env, values, own_only=not line.fact or points)
        else:  # prose: not a setting of the job's, but a value the report also tried
            for m in _ASSIGN.finditer(line.text):
                if not _ADVICE.search(line.text[: m.start()]):
                    values.setdefault(m.group(1), set()).add(_value(m.group(2)))
        previous_points = (points and line.text.rstrip().endswith(":")) or (points and not _settings_in(line))
    for name, seen in values.items():
        # "with CUDA_VISIBLE_DEVICES=0 it works; with 0,1,2,3 it fails": the report does not say which value the
        # failing job had, so none of them is judged
        if len(seen) > 1 and name == "CUDA_VISIBLE_DEVICES":
            env.env_vars.pop(name, None)
    _containers(paste, env)


_MAX_CONTINUED = 40  # lines one shell command may be continued over (`\`, PowerShell's backtick, cmd's `^`)
_CONTINUES = ("\\", "`", "^")


def continued_command(paste: Paste, line: Line) -> str:
    """The line with the lines that continue it (`docker run --rm \\` then `    --gpus all \\`): a flag on a
    continuation line is part of the command."""
    parts = [line.text]
    following = paste.window(line.index + 1, _MAX_CONTINUED)
    for more in following:
        if not parts[-1].rstrip().endswith(_CONTINUES):
            break
        parts.append(more.text)
    return " ".join(part.rstrip().rstrip("\\`^") for part in parts)


def _settings_in(line: Line) -> bool:
    return bool(_ASSIGN.search(line.text) or _ENVIRON.search(line.text))


def _settings(line: Line, env: Environment, values: dict[str, set[str]], *, own_only: bool) -> None:
    """Record the variables set on this line; in a suggestion that points at the user's line, only the first one.
    `values`: every value each variable was given in the report."""
    found = [(m.start(), m.group(1), m.group(2)) for m in _ENVIRON.finditer(line.text)]
    found += [(m.start(), m.group(1), m.group(2)) for m in _ASSIGN.finditer(line.text)]
    # torch's own hint in every CUDA error ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1") sets nothing
    found = [f for f in found if not _ADVICE.search(line.text[: f[0]])]
    for _, name, raw in sorted(found)[:1] if own_only else sorted(found):
        value = _value(raw)
        env.env_vars.setdefault(name, value)
        if value:
            values.setdefault(name, set()).add(value)


def _value(raw: str) -> str:
    """A setting's value as the text gives it: unquoted, its markdown emphasis and the sentence's punctuation off
    (`**CUDA_VISIBLE_DEVICES=-1**:` is -1), cut to a fact's length."""
    return cap(raw.strip().strip("\"'`").rstrip("*_:.,!?").strip("\"'`"))


def _containers(paste: Paste, env: Environment) -> None:
    h = env.host
    for line in paste.facts():
        run = _RUN.search(line.text)
        if run and h.container_gpu_requested is None:
            h.in_container = True
            h.container_kind = "podman" if run.group(1) == "podman" else "docker"
            command = continued_command(paste, line)
            h.container_gpu_requested = bool(run.group(1) == "nvidia-docker" or _GPU_FLAG.search(command))
            first(h, "container_evidence", f"`{run.group(1)} run`")
        if "nvidia.com/gpu" in line.low or "runtime: nvidia" in line.low or "capabilities: [gpu" in line.low:
            h.in_container = True
            h.container_kind = h.container_kind or ("kubernetes" if "nvidia.com/gpu" in line.low else "docker")
            h.container_gpu_requested = True if h.container_gpu_requested is None else h.container_gpu_requested
            first(h, "container_evidence", "a GPU request in a container spec")
        if "could not select device driver" in line.low:
            h.in_container, h.container_kind = True, h.container_kind or "docker"
            h.container_gpu_requested = True
            first(h, "container_evidence", "docker's GPU request error")
        if "nvidia-container-cli" in line.low:
            h.container_kind = h.container_kind or "docker"
    _manifest_gpu_request(paste, env)


_COMPOSE_GPU = ("driver: nvidia", "capabilities: [gpu", 'capabilities: ["gpu', "- gpu", "runtime: nvidia", "gpus: all")
_K8S_KIND = re.compile(r"^kind:[ \t]*(Pod|Deployment|Job|StatefulSet|DaemonSet|CronJob)\b")


def _manifest_gpu_request(paste: Paste, env: Environment) -> None:
    """A compose file (`services:`) or a Kubernetes manifest (`kind: Pod`, ...) pasted whole: it asks for a GPU with
    `deploy.resources.reservations.devices` / `runtime: nvidia` / `gpus:` or a `nvidia.com/gpu` limit, or not."""
    h = env.host
    if h.container_gpu_requested is not None:
        return
    compose = k8s = asks_gpu = False
    for line in paste.facts():
        text = line.text.rstrip()
        compose = compose or text == "services:"
        k8s = k8s or bool(_K8S_KIND.match(text))
        asks_gpu = asks_gpu or any(word in line.low for word in _COMPOSE_GPU) or "nvidia_visible_devices" in line.low
    if compose or k8s:
        h.in_container, h.container_gpu_requested = True, asks_gpu
        first(h, "container_evidence", "a Kubernetes manifest" if k8s else "a compose file")
        h.container_kind = h.container_kind or ("kubernetes" if k8s else "docker")


# uv's own commands as typed or logged, its lock file, its pyproject table: the user's environment is uv's.
# `uv pip install` and `uv venv` alone are a uv-managed venv, not a project.
_UV = re.compile(
    r"(?P<project>(?:^|[\s>$`])uv[ \t]+(?:sync|add|run|lock)\b|\buv\.lock\b|\[tool\.uv[.\]])|"
    r"(?:^|[\s>$`])uv[ \t]+(?:venv|pip[ \t]+install)\b"
)


def interpreter(paste: Paste, env: Environment) -> None:
    """The Python the job runs with, where a command names it by path (HostFacts.python_command), and whether uv
    manages its environment (HostFacts.uv_project, or uv_venv: a venv of `uv pip` without a project)."""
    for line in paste.containing("uv"):
        if line.fact and (uv := _UV.search(line.text)):
            if uv.group("project"):
                env.host.uv_project, env.host.uv_venv = True, None
                break
            env.host.uv_venv = True
    for line in paste.containing("python"):
        if match := _INTERPRETER.match(line.text) or _EXECUTABLE.match(line.text):
            first(env.host, "python_command", cap(match.group(1)))
            return
    for line in paste.containing("site-packages"):
        if (py := _python_of_site_packages(line.text)) is not None:
            first(env.host, "python_command", cap(py))
            return


def _python_of_site_packages(text: str) -> str | None:
    r"""The Windows Python whose site-packages holds torch, from a traceback's path: a bundled Python of a one-click
    package, never on PATH (`...\system\python\Lib\site-packages\torch` -> `...\system\python\python.exe`), or a
    venv (`...\venv\Lib\...` -> `...\venv\Scripts\python.exe`). Elsewhere the environment that holds torch is the
    activated one, whose `python` the fix already runs."""
    win = _WINDOWS_SITE.search(text)
    if win is None:
        return None
    prefix = win.group(1)
    last = prefix.rsplit("\\", 1)[-1].lower()
    if last.startswith("python"):
        return prefix + "\\python.exe"
    if last in ("venv", ".venv", "env", ".env") or last.endswith(("-venv", "_venv", "-env", "_env")):
        return prefix + "\\Scripts\\python.exe"
    return None
