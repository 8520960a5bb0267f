"""Complete install fixes (issue #14): the wrong build goes first (pip keeps an installed +cpu wheel; conda's cpuonly
pins every later solve), the companions in the paste move to the same variant, and every pinned version exists.

The property is checked on every fix the labelled corpus produces, then on a few exact commands.
"""

from __future__ import annotations

import re

import pytest
from env_corpus import Report, all_reports, pasted_text

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text
from gputriage.data.cuda_tables import COMPANIONS, TORCH_RELEASES, release_of
from gputriage.findings import Finding

INSTALL_FIXES = ("cpu-only-build", "driver-too-old", "arch-not-supported")
_PIN = re.compile(r"\b(torch|torchvision|torchaudio)==([0-9][\w.]*)(?:\+(cu\d+))?")
_INDEX = re.compile(r"download\.pytorch\.org/whl/(cu\d+)")


def _tag_cuda(tag: str) -> str:
    digits = tag.removeprefix("cu")
    return f"{digits[:-1]}.{digits[-1]}"


def _install_fixes(report: Report) -> list[tuple[Finding, dict[str, str], bool | None]]:
    text = pasted_text(report.path)
    env = parse_environment_text(text)
    diag = diagnose_text(text, "cuda")
    found = [f for f in diag.findings if f.code in INSTALL_FIXES and "pip install torch" in (f.fix or "")]
    return [(f, env.torch.companions, env.torch.cpuonly_package) for f in found]


_CASES = [(r, f, c, o) for r in all_reports() for f, c, o in _install_fixes(r)]


@pytest.mark.parametrize(("report", "finding", "companions", "cpuonly"), _CASES, ids=lambda v: getattr(v, "name", ""))
def test_every_install_fix_is_complete(
    report: Report, finding: Finding, companions: dict[str, str], cpuonly: bool | None
) -> None:
    lines = (finding.fix or "").splitlines()
    install = next(i for i, line in enumerate(lines) if "pip install torch" in line)
    uninstall = [
        i for i, line in enumerate(lines) if ("pip uninstall -y torch" in line or "uv pip uninstall torch" in line)
    ]

    assert uninstall and uninstall[0] < install, "the wrong build must go first"
    removed = lines[uninstall[0]].split()
    moved = [m.group(1) for m in _PIN.finditer(lines[install])] + re.findall(
        r"\b(torchvision|torchaudio)\b", lines[install]
    )
    for name in companions:
        assert name in removed, f"{name} is in the paste but is not removed"
        if name != "xformers":
            assert name in moved, f"{name} is in the paste but not moved to the new variant"
    if cpuonly:
        assert any("conda remove" in line and "cpuonly" in line for line in lines[:install])
    _assert_pins_exist(lines[install])


def _assert_pins_exist(command: str) -> None:
    pins = {m.group(1): (m.group(2), m.group(3)) for m in _PIN.finditer(command)}
    index = _INDEX.search(command)
    if "torch" not in pins:
        return
    torch_version, local_tag = pins["torch"]
    tag = local_tag or (index.group(1) if index else None)
    release = TORCH_RELEASES.get(release_of(torch_version))
    assert release is not None, f"torch {torch_version} is not a known release"
    if tag is None:  # a 1.x release's default CUDA build, straight from PyPI
        assert release.pypi_cuda is not None and "-f " not in command and "--index-url" not in command
    else:
        assert _tag_cuda(tag) in release.cuda_variants, f"torch {torch_version} has no {tag} build"
    known = COMPANIONS.get(torch_version)
    if known is not None:
        for name, published in zip(("torchvision", "torchaudio"), known, strict=True):
            if name in pins and published is not None:
                assert pins[name][0] == published, (
                    f"{name} {pins[name][0]} was not published with torch {torch_version}"
                )


def test_the_corpus_yields_install_fixes_to_check() -> None:
    assert len(_CASES) >= 20  # the property above is not vacuous


def test_a_cpu_wheel_with_its_companions_moves_all_three() -> None:
    text = (
        "Successfully installed torch-2.1.0+cpu torchvision-0.16.0+cpu torchaudio-2.1.0+cpu\n"
        "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2 |\n"
        "|   0  NVIDIA GeForce RTX 3090   Off | 00000000:01:00.0 Off |                  N/A |\n"
        ">>> torch.cuda.is_available()\nFalse\n"
    )
    finding = diagnose_text(text).findings[0]

    assert finding.code == "cpu-only-build"
    assert finding.fix.splitlines()[:2] == [
        "python -m pip uninstall -y torch torchvision torchaudio",
        "python -m pip install torch==2.1.0 torchvision==0.16.0 torchaudio==2.1.0 "
        "--index-url https://download.pytorch.org/whl/cu121",
    ]


def test_conda_cpuonly_is_removed_with_the_packages() -> None:
    text = (
        "cpuonly                   2.0                           0    pytorch\n"
        "pytorch                   2.0.1               py3.10_cpu_0    pytorch\n"
        "torchvision               0.15.2                py310_cpu    pytorch\n"
        "Nvidia driver version: 525.85.12\nGPU models and configuration: GPU 0: NVIDIA GeForce RTX 3060\n"
        "Is CUDA available: False\n"
    )
    lines = diagnose_text(text).findings[0].fix.splitlines()

    assert lines[0].startswith("conda remove -y cpuonly pytorch torchvision")
    assert lines[1] == "python -m pip uninstall -y torch torchvision"
    assert lines[2] == (
        "python -m pip install torch==2.0.1 torchvision==0.15.2 --index-url https://download.pytorch.org/whl/cu118"
    )


def test_an_unknown_installer_in_a_conda_env_gets_the_cpuonly_check() -> None:
    text = (
        "PyTorch version: 1.8.1\nCUDA used to build PyTorch: Could not collect\nIs CUDA available: False\n"
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 3090\nNvidia driver version: 470.182.03\n"
        '  File "/home/me/miniconda3/envs/x/lib/python3.8/site-packages/torch/cuda/__init__.py", line 1\n'
    )
    lines = diagnose_text(text).findings[0].fix.splitlines()

    assert lines[0].startswith("conda list cpuonly")
    assert lines[2] == "python -m pip install torch==1.8.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html"


def test_an_unknown_installer_with_no_sign_of_conda_gets_no_conda_command() -> None:
    """`conda list` on a machine without conda is "command not found": a fix that does not paste."""
    text = (
        "PyTorch version: 1.8.1\nCUDA used to build PyTorch: Could not collect\nIs CUDA available: False\n"
        "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 3090\nNvidia driver version: 470.182.03\n"
        "(7.0) - (12.0)\n"
    )
    lines = diagnose_text(text).findings[0].fix.splitlines()

    assert not any("conda" in line for line in lines)
    assert lines[1] == "python -m pip install torch==1.8.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html"


def test_a_driver_too_old_fix_replaces_the_build_and_its_companions() -> None:
    text = (
        "PyTorch version: 2.4.0+cu124\nCUDA used to build PyTorch: 12.4\nIs CUDA available: False\n"
        "Nvidia driver version: 470.182.03\nGPU models and configuration: GPU 0: NVIDIA GeForce RTX 3090\n"
        "[pip3] torchvision==0.19.0+cu124\n"
        "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).\n"
    )
    finding = diagnose_text(text).findings[0]
    lines = finding.fix.splitlines()

    assert finding.code == "driver-too-old"
    assert "python -m pip uninstall -y torch torchvision" in lines
    install = next(line for line in lines if "pip install" in line)
    assert install == (
        "python -m pip install torch==2.4.0 torchvision==0.19.0 --index-url https://download.pytorch.org/whl/cu118"
    )
