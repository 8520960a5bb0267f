"""Rung 1 on a Mac, where the accelerator is Apple's GPU through MPS: why torch cannot use it.

MPS needs torch 1.12 or later, a build with the MPS backend, and a macOS that has risen with the releases
(data/cuda_tables.py `MPS_MIN_MACOS`). torch's own error has named an older minimum than some releases need, so the
macOS the report shows is compared with the table, and the error's figure is shown beside it.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputriage.data.cuda_tables import MPS_FIRST_RELEASE, mps_min_macos, newest_mps_release_for, version_tuple
from gputriage.findings import Evidence, Finding, Severity
from gputriage.record import Run
from gputriage.record.environment import Environment
from gputriage.rules.env_facts import expected_kind
from gputriage.rules.env_fixes import for_the_jobs_python
from gputriage.rules.registry import rule

_CHECK = 'python -c "import torch; print(torch.backends.mps.is_available())"   # must print True'
_UPDATE = "# macOS: System Settings > General > Software Update"


@rule
def mps_unavailable(run: Run) -> Iterator[Finding]:
    """mps-unavailable: the job is meant for Apple's GPU (MPS) and torch cannot use it, with the reason the facts
    give: a torch older than MPS, a build without it, or a macOS older than the release needs."""
    env = run.environment
    if env is None or env.host.os_name != "darwin" or expected_kind(run) != "mps":
        return
    if env.torch.other_accelerators.get("mps") is True:
        return
    t, macos = env.torch, env.host.macos_version
    needed = mps_min_macos(t.version) if t.version else None
    evidence: Evidence = {
        "torch_version": t.version,
        "macos_version": macos,
        "macos_needed": needed,
        "error_says_macos": t.mps_error_min_macos,
        "mps_available": t.other_accelerators.get("mps"),
        "mps_built": t.mps_built,
    }
    reason = _reason(env, needed)
    if reason is None:
        return
    title, fix = reason
    shown = {k: v for k, v in evidence.items() if v is not None}
    fix = for_the_jobs_python(fix, env)
    yield Finding(code="mps-unavailable", rung=1, severity=Severity.CRITICAL, title=title, evidence=shown, fix=fix)


def _reason(env: Environment, needed: str | None) -> tuple[str, str] | None:
    t, macos = env.torch, env.host.macos_version
    if t.version and version_tuple(t.version)[:2] < MPS_FIRST_RELEASE:
        return (
            f"torch {t.version} predates MPS, Apple's GPU backend (torch 1.12 and later)",
            "python -m pip install --upgrade torch torchvision torchaudio\n" + _CHECK,
        )
    if t.mps_built is False:
        return (
            f"This torch{f' {t.version}' if t.version else ''} was built without MPS, Apple's GPU backend",
            'python -c "import platform; print(platform.machine())"   # arm64 on Apple silicon; x86_64 there is a '
            "Python under Rosetta: install an arm64 Python\n"
            "python -m pip install --force-reinstall torch torchvision torchaudio\n" + _CHECK,
        )
    by_macos = _macos_reason(env, macos, needed) if macos is not None else None
    if by_macos is not None:
        return by_macos
    if env.torch.other_accelerators.get("mps") is not False:
        return None  # nothing says MPS fails here
    if t.version and t.mps_built and needed is not None and macos is not None and not env.host.rosetta:
        return _blocked_outside_torch(t.version, macos, needed)
    return (
        "MPS is not available, and the report does not say why",
        'python -c "import platform, torch; print(platform.mac_ver()[0], platform.machine(), torch.__version__, '
        'torch.backends.mps.is_built())"\n'
        "# macOS 12.3+ for torch 1.12-2.4, 13.0+ for 2.5-2.9, 14.0+ for 2.10 and later; arm64 (not x86_64 under "
        "Rosetta); is_built() True",
    )


def _blocked_outside_torch(version: str, macos: str, needed: str) -> tuple[str, str]:
    """Every requirement the report shows is met, and MPS still answers False: what keeps Metal from the process is
    outside torch and macOS (codex#10199: an agent's sandbox; a VM without GPU passthrough; a headless session)."""
    title = (
        f"MPS is unavailable although torch {version} is an MPS build and macOS {macos} meets its {needed}+: "
        "something outside torch keeps Metal from this process"
    )
    fix = (
        "# run the check from a plain Terminal on the Mac itself, outside the tool that ran the job:\n"
        f"{_CHECK}\n"
        "# True there: the job's own launcher blocks the GPU: an agent's or an app's sandbox (grant it GPU / Metal\n"
        "# access, or run outside it), a virtual machine or CI runner without GPU passthrough, or a remote session\n"
        "# without a logged-in user. False there too: reinstall torch for the arm64 Python (platform.machine())"
    )
    return title, fix


def _macos_reason(env: Environment, macos: str, needed: str | None) -> tuple[str, str] | None:
    """The macOS is below what the release needs, below any MPS, or (the release unsaid) below what a release that
    fails there needs although the error names less."""
    t = env.torch
    if needed is not None and version_tuple(macos) < version_tuple(needed):
        return _macos_too_old(env, macos, needed)
    if version_tuple(macos) < version_tuple("12.3"):
        return (
            f"MPS needs macOS 12.3 or later, and this Mac runs macOS {macos}",
            f"{_UPDATE}: 12.3 or later (14.0 or later for torch 2.10 and newer)\n{_CHECK}",
        )
    if t.version is None and t.mps_error_min_macos is not None and t.other_accelerators.get("mps") is False:
        return _error_understates(macos, t.mps_error_min_macos)
    return None


def _error_understates(macos: str, said: str) -> tuple[str, str] | None:
    """MPS refused a macOS at or above the minimum its error names (fastbook#671: "supported on MacOS 12.3+" on
    12.7.6): the torch installed is a release that needs more than the error says; the first such release the
    table gives for this macOS is the bound, whatever the version the report leaves out."""
    older = newest_mps_release_for(macos)
    if older is None or version_tuple(macos) < version_tuple(said):
        return None
    bound = older.removeprefix("torch<")
    needs = mps_min_macos(bound) or ""
    title = (
        f"MPS cannot run here: this Mac runs macOS {macos}, and its torch needs more than the macOS {said}+ its "
        f"error names: torch {bound} and later need macOS {needs} or later"
    )
    fix = (
        f"{_UPDATE}: {needs} or later\n"
        f"# or keep macOS {macos} and install the newest torch whose MPS runs on it:\n"
        f'python -m pip install "{older}"\n{_CHECK}'
    )
    return title, fix


def _macos_too_old(env: Environment, macos: str, needed: str) -> tuple[str, str]:
    t = env.torch
    title = (
        f"MPS cannot run here: torch {t.version} needs macOS {needed} or later for Apple's GPU, and this Mac runs "
        f"macOS {macos}"
    )
    lines = [f"{_UPDATE}: {needed} or later"]
    older = newest_mps_release_for(macos)
    if older is not None:
        companions = "".join(f" {name}" for name in ("torchvision", "torchaudio") if name in t.companions)
        lines += [
            f"# or keep macOS {macos} and install the newest torch whose MPS runs on it:",
            f'python -m pip install "{older}"{companions}',
        ]
    said = t.mps_error_min_macos
    if said is not None and version_tuple(said) != version_tuple(needed):
        lines.append(f"# torch's own error says macOS {said}+, which understates what torch {t.version} needs")
    lines.append(_CHECK)
    return title, "\n".join(lines)
