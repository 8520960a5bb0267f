"""Which torch is installed, from what package tools printed, and what was asked of them.

Facts, strongest first: a package list (`pip list`, `pip show`, `conda list`, collect_env's `[pip3]` / `[conda]`
lines, `conda env export`, uv.lock), a pip / uv / poetry log (`Successfully installed torch-2.1.0+cpu`,
`Requirement already satisfied: torch in ... (2.0.0)`, `Downloading torch-2.1.0-cp311-cp311-win_amd64.whl`). Then
install commands that the user ran (not suggested ones): they tell the intent, and through the release tables what a
solver resolves ("pytorch=1.9.0 cudatoolkit=11.3" has no CUDA 11.3 package, so conda falls back to the CPU build).
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import fail_wins, first
from gputriage.collectors.env_text.limits import MAX_ITEMS, version
from gputriage.collectors.env_text.lines import Line, Paste
from gputriage.data.cuda_tables import TORCH_RELEASES, release_of, version_tuple
from gputriage.record.environment import Environment

COMPANION_NAMES = ("torchvision", "torchaudio", "xformers")
_TORCH_NAMES = ("torch", "pytorch", "pytorch-cpu", "pytorch-gpu")
_LIST_LINE = re.compile(
    r"^[ \t]*(torch|pytorch(?:-cpu|-gpu)?|torchvision|torchaudio|xformers|cpuonly|pytorch-mutex|_pytorch_select|"
    r"pytorch-cuda|cudatoolkit)(?:[ \t]*==[ \t]*|[ \t]+)([0-9][\w.+-]{0,40})(?:[ \t]+(\S{1,80}))?"
)
# conda's solver names a package as channel/subdir::name-version-build ("pytorch/win-64::pytorch-1.10.0-py3.8_cpu_0"):
# what it installs, with the build string that says CPU or CUDA and the Python
_CONDA_SPEC = re.compile(
    r"(?:^|[\s(])[\w.-]{1,40}/[\w-]{1,20}::(pytorch|torch|torchvision|torchaudio)-([0-9][\w.]{0,30})-(\S{1,60})"
)
_BUILD_PYTHON = re.compile(r"(?:^|_)py(3)\.?([0-9]{1,2})(?:_|$)")
_PIN = re.compile(r"\b(torch|torchvision|torchaudio|xformers)[ \t]*={1,3}[ \t]*([0-9][\w.+-]{0,40})")
_INSTALLED = re.compile(r"Successfully installed (.{1,2000})", re.IGNORECASE)
# pip's log of what it is about to install, a dependency's torch among them: "Installing collected packages: ...,
# torch, ..." (no versions on that line).
_COLLECTED = re.compile(r"Installing collected packages:[^\n]{0,4000}?(?:^|[ \t,:])torch(?:[ \t]*,|[ \t]*$)")
_DIST = re.compile(r"\b(torch|torchvision|torchaudio|xformers)-([0-9][\w.+]{0,40})")
_ALREADY = re.compile(
    r"Requirement already satisfied: (torch|torchvision|torchaudio)\b.{0,200}?\(([0-9][\w.+]{0,40})\)"
)
_WHEEL = re.compile(
    r"\b(torch)-([0-9][\w.+]{0,40}?)-cp[0-9]{2,3}-[\w]{1,20}-(win_amd64|manylinux\w{0,40}|linux_\w{1,20}|"
    r"macosx\w{0,40})\.whl"
)
_FAILED_FETCH = re.compile(r"failed url|\b404\b|not found|could not (?:fetch|download|find)|no such file", re.I)
_SHOW = re.compile(r"^Version:[ \t]*([0-9][\w.+]{0,40})$")
_UV_LOCK = re.compile(r'name = "(torch|torchvision|torchaudio)", version = "([0-9][\w.+]{0,40})"')
_POETRY = re.compile(r"Installing (torch|torchvision|torchaudio) \(([0-9][\w.+]{0,40})\)")
_UV_OUT = re.compile(r"^[ \t]*\+ (torch|torchvision|torchaudio)==([0-9][\w.+]{0,40})")
_YAML_DEP = re.compile(
    r"^[ \t]*- (?:pytorch::)?(pytorch|torch|cpuonly|pytorch-cuda|cudatoolkit|torchvision|torchaudio)"
    r"(?:[ \t]*[=<>]{1,2}[ \t]*([0-9][\w.*]{0,30}))?(?:=(\S{1,80}))?[ \t]*$"
)
_LISTED_COMPANION = re.compile(
    r"^[ \t]*(?:[-*•][ \t]*)?\**(torchvision|torchaudio|xformers)\**(?:[ \t]+version)?[ \t]*[:=][ \t]*v?"
    r"([0-9][\w.+]{0,30})[ \t]*$",
    re.IGNORECASE,
)
_PIP_CMD = re.compile(r"\b(?:pip3?|uv pip|uv add|poetry add)[ \t]+(?:install|add)?\b(.{0,300})")
_CONDA_CMD = re.compile(r"\b(?:conda|mamba|micromamba)[ \t]+(?:install|create)\b(.{0,300})")
_INDEX = re.compile(r"download\.pytorch\.org/whl/(?:nightly/)?(cpu|cu[0-9]{2,3}|rocm[0-9.]{1,8})\b")
_CONDA_CUDA = re.compile(r"(?:cudatoolkit|pytorch-cuda)[ \t]*={1,2}[ \t]*([0-9]{1,2}\.[0-9])")
# A torch local version named anywhere ("gave me `2.12.1+cpu`", "torch 2.7.0+cpu"): only torch versions look so.
_LOCAL_VERSION = re.compile(r"(?<![\w.-])([0-9]\.[0-9]{1,2}\.[0-9]{1,2}(?:\.dev[0-9]{8})?\+(?:cpu|cu[0-9]{2,3}))\b")
_PROSE_CPU = re.compile(
    r"\b(?:cpu[- ]?only|cpu[- ]enabled[- ]only|cpuonly|non-?cuda|cpu (?:version|build|wheel|variant))\b.{0,40}?"
    r"\b(?:torch|pytorch|pytroch|version|build|wheel)\b|\b(?:torch|pytorch|pytroch)\b.{0,24}?\b(?:without cuda|"
    r"cpu[- ]?only|cpuonly|cpu (?:version|build))\b|\b(?:the|a) cpu version\b",
    re.IGNORECASE,
)
_CONDA_TORCH = re.compile(r"\bpytorch[ \t]*={1,2}[ \t]*([0-9][\w.]{0,20})")


def extract(paste: Paste, env: Environment) -> None:
    for line in paste.facts():
        _list_line(line, env, _shown_by_pip(paste, line))
        _log_line(line, env)
    for line in paste.facts():
        if line.low.lstrip().startswith("- "):
            _yaml_dep(line, env)
        if (listed := _LISTED_COMPANION.match(line.text)) is not None:  # a set-up list's "- xformers: 0.0.27"
            record_package(env, listed.group(1).lower(), listed.group(2), build=None, manager="pip", text=line.text)
        if "+c" not in line.low:
            continue
        for local in _LOCAL_VERSION.finditer(line.text):
            record_package(env, "torch", local.group(1), build=None, manager="pip", text=line.text)
    _install_commands(paste, env)
    _prose_build(paste, env)
    _conda_seen(paste, env)


# What shows conda on the reporter's machine: collect_env's "[conda]" list, a conda command, a conda install's path.
# Without one, a fix does not ask to check for conda's cpuonly package.
_CONDA_MARK = re.compile(
    r"^\[conda\]|\b(?:conda|mamba|micromamba)[ \t]+(?:install|create|activate|list|env|remove|update)\b|"
    r"(?:ana|mini|micro)conda|miniforge|mambaforge|[/\\]conda[/\\]",
    re.IGNORECASE,
)


def _conda_seen(paste: Paste, env: Environment) -> None:
    if env.torch.install_method == "conda" or env.torch.cpuonly_package:
        env.host.conda_seen = True
        return
    for line in paste.lines:  # a suggested conda command is not the reporter's conda
        hinted = "conda" in line.low or "mamba" in line.low
        if line.fact and hinted and _CONDA_MARK.search(line.text):
            env.host.conda_seen = True
            return


def _prose_build(paste: Paste, env: Environment) -> None:
    """ "the install swapped the CUDA pytorch for a CPU-only one": weaker than any package fact, so only when no
    build fact was read."""
    t = env.torch
    if t.cuda_version or t.cpu_build_evidence or t.hip_version:
        return
    for line in paste.facts():
        hinted = "cpu" in line.low or "cuda" in line.low
        if hinted and _PROSE_CPU.search(line.text) and "--index-url" not in line.low:
            t.cpu_build_evidence = line.text.strip()
            return


def record_package(
    env: Environment, name: str, pkg_version: str, *, build: str | None, manager: str, text: str
) -> None:
    """One installed package as a list shows it; the torch build's CUDA or CPU-ness comes from its version / build."""
    t = env.torch
    v = version(pkg_version)
    build = build or ""
    if name in _TORCH_NAMES and v:
        first(t, "version", v)
        fail_wins(t, "installed", True)
        if _base(t.version or "") == _base(v):  # a stale line of another torch ([pip3] torch==1.2.0 beside the
            first(t, "install_method", manager)  # running conda 1.3.0) says nothing of how this one came
        if t.version != v:
            cpu_build = name == "pytorch-cpu" or bool(re.search(r"(?:^|[_-])cpu(?:[_-]|$)", build))
            named = f"{v}+cpu" if cpu_build and "+" not in v else v
            if named not in t.other_versions and len(t.other_versions) < MAX_ITEMS:
                t.other_versions.append(named)
            return  # another torch was read first; the derivation weighs the two builds
        if name == "pytorch-cpu" or re.search(r"(?:^|[_-])cpu(?:[_-]|$)", build) or v.endswith("+cpu"):
            first(t, "cpu_build_evidence", text)
        cuda = re.search(r"cuda_?([0-9]{1,2}\.?[0-9])", build) or re.search(r"\+cu([0-9]{2,3})$", v)
        if cuda:
            first(t, "cuda_version", _cuda_from_tag(cuda.group(1)))
    elif name in COMPANION_NAMES and v and len(t.companions) < MAX_ITEMS:
        if manager == t.install_method:  # installed the way the running torch was: its own pair
            t.companions[name] = v
        else:
            t.companions.setdefault(name, v)
    elif name == "cpuonly" or (name == "pytorch-mutex" and "cpu" in build):
        t.cpuonly_package, t.install_method = True, "conda"
        first(t, "cpu_build_evidence", text)
    elif name == "_pytorch_select" and "cpu" in build:  # the defaults channel's selector of the CPU variant
        first(t, "install_method", "conda")
        first(t, "cpu_build_evidence", " ".join(text.split()))


def _shown_by_pip(paste: Paste, line: Line) -> bool:
    """A "Version:" line of `pip show torch`, which prints "Name: torch" first: an app's own "Version: 1.4.0" (beside
    its branch and commit) is not torch's."""
    before = paste.lines[max(0, line.index - 3) : line.index]
    return any(b.low.strip() in ("name: torch", "name: pytorch") for b in before)


def _list_line(line: Line, env: Environment, shown_by_pip: bool = False) -> None:
    if "torch" not in line.low and "cpuonly" not in line.low and "version:" not in line.low:
        return
    match = _LIST_LINE.match(line.text)
    show = _SHOW.match(line.text.strip()) if shown_by_pip else None
    if match:
        record_package(
            env, match.group(1), match.group(2), build=match.group(3), manager=_manager(match.group(3)), text=line.text
        )
        if "[cpuonly]" in line.low:  # conda list marks packages pinned by the cpuonly package's feature
            env.torch.cpuonly_package, env.torch.install_method = True, "conda"
    elif show:
        record_package(env, "torch", show.group(1), build=None, manager="pip", text=line.text)
    for pattern in (_UV_LOCK, _POETRY, _UV_OUT):
        for found in pattern.finditer(line.text):
            record_package(env, found.group(1), found.group(2), build=None, manager="pip", text=line.text)
    if "::" in line.text:
        for spec in _CONDA_SPEC.finditer(line.text):
            record_package(env, spec.group(1), spec.group(2), build=spec.group(3), manager="conda", text=line.text)
            python = _BUILD_PYTHON.search(spec.group(3))
            if python is not None and spec.group(1) in _TORCH_NAMES:
                first(env.host, "python_version", f"{python.group(1)}.{python.group(2)}")


def _manager(build: str | None) -> str:
    return "conda" if build and re.search(r"py[0-9]|cuda|cpu_|conda|pytorch$", build) else "pip"


def _log_line(line: Line, env: Environment) -> None:
    if "torch" not in line.low:
        return
    if "collected packages" in line.low and _COLLECTED.search(line.text):
        first(env.torch, "pip_installed_torch", "pip installed torch itself (Installing collected packages: ... torch)")
        first(env.torch, "install_method", "pip")
    installed = _INSTALLED.search(line.text)
    if installed:
        for dist in _DIST.finditer(installed.group(1)):
            record_package(
                env,
                dist.group(1),
                dist.group(2),
                build=None,
                manager="pip",
                text=f"Successfully installed {dist.group(0)}",
            )
    already = _ALREADY.search(line.text)
    if already:
        record_package(env, already.group(1), already.group(2), build=None, manager="pip", text=line.text)
        if re.search(r"\b[a-z]:\\", line.low):
            first(env.host, "os_name", "windows")
            if already.group(1) == "torch" and "+" not in already.group(2):
                # pip kept the torch it found; a plain version on Windows is PyPI's CPU-only wheel
                first(env.torch, "cpu_build_evidence", line.text)
    wheel = _WHEEL.search(line.text)
    if wheel and _FAILED_FETCH.search(line.text):
        wheel = None  # a wheel that could not be fetched ("Failed URL", 404) is not what is installed
    if wheel:
        record_package(env, "torch", wheel.group(2), build=None, manager="pip", text=line.text)
        if wheel.group(3) == "win_amd64":
            first(env.host, "os_name", "windows")


def _yaml_dep(line: Line, env: Environment) -> None:
    """environment.yml / `conda env export`: "- pytorch=1.11.0=py3.8_cpu_0", "- cpuonly", "- cudatoolkit=11.3"."""
    match = _YAML_DEP.match(line.text)
    if not match:
        return
    name, pkg_version, build = match.groups()
    t = env.torch
    if name == "cpuonly":
        t.cpuonly_package, t.install_method = True, "conda"
        first(t, "cpu_build_evidence", line.text.strip())
    elif name in ("pytorch", "torch") and build:
        record_package(env, "pytorch", pkg_version or "", build=build, manager="conda", text=line.text)
    elif name in ("cudatoolkit", "pytorch-cuda") and pkg_version and t.install_command is None:
        t.install_command = f"conda env: {line.text.strip()}"


def _install_commands(paste: Paste, env: Environment) -> None:
    """The first install command that the user ran; its pins and index say what they asked for."""
    t = env.torch
    for line in paste.facts():
        pip = _PIP_CMD.search(line.text) if "torch" in line.low else None
        conda = _CONDA_CMD.search(line.text) if "pytorch" in line.low else None
        command = pip or conda
        if command is None or t.install_command is not None:
            continue
        t.install_command = line.text.strip()
        first(t, "install_method", "conda" if conda else "pip")
        pins = {pin.group(1): pin.group(2) for pin in _PIN.finditer(line.text)}
        # The command's companions are this torch's only when it pins this torch (or none): a command for torch
        # 1.7.0 says nothing of what sits beside the 1.13.1 that the report shows failing.
        asked = pins.get("torch") or pins.get("pytorch")
        if not (asked and t.version and _base(asked) != _base(t.version)):
            for name, pinned in pins.items():
                if name in COMPANION_NAMES:
                    t.companions.setdefault(name, pinned)
        if "cpuonly" in line.low.split():
            t.cpuonly_package = True
        env.host.os_name = env.host.os_name or _os_of_command(line.text)


def _base(version_text: str) -> str:
    return version_text.split("+", 1)[0]


def _os_of_command(text: str) -> str | None:
    return "windows" if re.search(r"\b[A-Za-z]:\\|\.exe\b", text) else None


def infer_from_command(env: Environment) -> None:
    """What the install command the user ran resolves to, when no installed-package fact says it."""
    t = env.torch
    command = t.install_command or ""
    if not command or t.cuda_version or t.cpu_build_evidence:
        return
    index = _INDEX.search(command)
    pin = _PIN.search(command)
    asked = (pin.group(2) if pin and pin.group(1) == "torch" else None) or _first(_CONDA_TORCH, command)
    if asked and t.version is None:
        t.version = version(asked)
    if index and index.group(1) == "cpu":
        t.cpu_build_evidence = f"installed from the CPU index: {command}"
    elif index and index.group(1).startswith("cu") and _never_published(index.group(0), index.group(1)):
        _pypi_instead(env, index.group(0), command)
    elif index and index.group(1).startswith("cu"):
        _inferred(env, _cuda_from_tag(index.group(1)[2:]), f"the install command's index ({index.group(0)})")
    elif (toolkit := _first(_CONDA_CUDA, command)) is not None:
        _conda_toolkit(env, toolkit, asked, command)
    elif "cpuonly" in command.lower().split():
        t.cpu_build_evidence = f"conda's cpuonly package: {command}"


# Every CUDA variant a release was published for: an index between them that is not one of them does not exist.
_PUBLISHED_CUDA = frozenset(
    ".".join(map(str, version_tuple(c)[:2])) for r in TORCH_RELEASES.values() for c in r.cuda_variants
)
_NEWEST_CUDA = max(_PUBLISHED_CUDA, key=version_tuple)


def _never_published(url: str, tag: str) -> bool:
    """`whl/cu114`: no release was built for CUDA 11.4, so download.pytorch.org has no such index (a nightly's, or one
    newer than the table knows, may exist)."""
    cuda = _cuda_from_tag(tag[2:])
    if cuda is None or "/nightly/" in url:
        return False
    return cuda not in _PUBLISHED_CUDA and version_tuple(cuda) < version_tuple(_NEWEST_CUDA)


def _pypi_instead(env: Environment, url: str, command: str) -> None:
    """`--extra-index-url .../whl/cu114`: the index does not exist, so pip takes torch from PyPI, whose wheels for
    Windows and macOS are CPU builds; with `--index-url` alone the install fails, and nothing is inferred."""
    extra = "--extra-index-url" in command or " -f " in f" {command} " or "--find-links" in command
    if extra and env.host.os_name in ("windows", "macos"):
        env.torch.cpu_build_evidence = (
            f"{command}: download.pytorch.org has no {url.rsplit('/', 1)[-1]} index (no release was built for that "
            "CUDA), so pip took torch from PyPI, whose wheels for this OS are CPU builds"
        )


def _conda_toolkit(env: Environment, toolkit: str, asked: str | None, command: str) -> None:
    """`conda install pytorch=X cudatoolkit=C`: a CUDA build when release X was published for C, else the CPU one."""
    release = TORCH_RELEASES.get(release_of(asked)) if asked else None
    published = release is not None and any(
        version_tuple(c)[:2] == version_tuple(toolkit)[:2] for c in release.cuda_variants
    )
    if release is not None and not published:
        env.torch.cpu_build_evidence = (
            f"{command}: no pytorch {asked} package was built for CUDA {toolkit}, so the solver picks the CPU build"
        )
        return
    _inferred(env, toolkit, f"the conda command's cudatoolkit/pytorch-cuda={toolkit}")


def _inferred(env: Environment, cuda: str | None, origin: str) -> None:
    if cuda and env.torch.cuda_version is None:
        env.torch.cuda_version, env.torch.cuda_version_inferred_from = cuda, origin


def _cuda_from_tag(tag: str) -> str | None:
    """ "121" / "12.1" / "11" -> "12.1" / "12.1" / None (CUDA wheel tags are cu + major + one minor digit)."""
    digits = tag.replace(".", "")
    if not digits.isascii() or not digits.isdigit() or len(digits) not in (2, 3):
        return None
    return f"{digits[:-1]}.{digits[-1]}"


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(text)
    return match.group(1) if match else None
