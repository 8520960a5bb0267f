"""Rung 1 on a Mac, where the GPU is Apple's, through MPS: a third user trial (stop 37) found three Mac reports read
with CUDA's logic ("no NVIDIA on a Mac, use MPS") and one refused, while each said MPS itself failed and showed the
macOS that explains why. Texts are our own, in the shape people paste."""

from __future__ import annotations

from env_fixtures import codes, diagnose_env

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text
from gputriage.findings import Severity
from gputriage.record.environment import Environment, HostFacts, TorchFacts

_MPS_ERROR_OLD_MACOS = (
    "# PyTorch 2.5.1 does not find the MPS device on my M1\n\n"
    "Moving a tensor to mps fails with:\n\n"
    "```\nRuntimeError: The MPS backend is supported on MacOS 12.3+.\n"
    "Current OS version can be queried using `sw_vers`.\n\n"
    ">> sw_vers\nProductName:\tmacOS\nProductVersion:\t12.7.6\nBuildVersion:\t21H1320\n```\n"
)

_COLLECT_ENV_MAC = (
    '>>> print(f"Is MPS available? {torch.backends.mps.is_available()}")\n'
    "Is MPS available? False\n\n"
    "PyTorch version: 2.10.0.dev20251008\n"
    "CUDA used to build PyTorch: None\n"
    "OS: macOS 13.7.4 (arm64)\n"
    "Python platform: macOS-13.7.4-arm64-arm-64bit\n"
    "Is CUDA available: False\n"
    "[pip3] torch==2.10.0.dev20251008\n"
    "[pip3] torchvision==0.25.0.dev20251008\n"
)


def test_a_macos_older_than_the_release_needs_is_the_cause_even_where_the_error_understates_it() -> None:
    diag = diagnose_text(_MPS_ERROR_OLD_MACOS)

    assert diag.verdict.root_cause == "mps-unavailable"
    f = diag.findings[0]
    assert (f.evidence["torch_version"], f.evidence["macos_version"]) == ("2.5.1", "12.7.6")
    assert (f.evidence["macos_needed"], f.evidence["error_says_macos"]) == ("13.0", "12.3")
    assert "needs macOS 13.0 or later" in f.title
    assert 'python -m pip install "torch<2.5"' in f.fix  # the newest release whose MPS runs on macOS 12.x
    assert "understates" in f.fix


def test_a_collect_env_from_a_mac_is_judged_for_mps_not_cuda() -> None:
    diag = diagnose_text(_COLLECT_ENV_MAC)

    assert diag.verdict.root_cause == "mps-unavailable"
    assert 'python -m pip install "torch<2.10" torchvision' in diag.findings[0].fix
    # no NVIDIA finding is more than info, and "built without CUDA" is not said of a macOS build at all
    assert "cpu-only-build" not in codes(diag)
    assert all(f.severity is Severity.INFO for f in diag.findings if f.code != "mps-unavailable")


def test_a_macos_below_every_releases_minimum_offers_no_older_torch() -> None:
    text = _COLLECT_ENV_MAC.replace("13.7.4", "12.2.1").replace("2.10.0.dev20251008", "1.13.0")

    fix = diagnose_text(text).findings[0].fix

    assert "12.3 or later" in fix
    assert "pip install" not in fix


def test_mps_that_works_is_not_a_finding() -> None:
    diag = diagnose_text(_COLLECT_ENV_MAC.replace("Is MPS available? False", "Is MPS available? True"))

    assert "mps-unavailable" not in codes(diag)
    assert diag.verdict.status != "idle"


def test_a_mac_report_about_cuda_alone_is_still_about_cuda() -> None:
    text = "On my MacBook Pro (macOS 14.2) torch.cuda.is_available() returns False with torch 2.2.0\n"

    diag = diagnose_text(text)

    assert diag.verdict.root_cause == "no-gpu-visible"
    assert "mps-unavailable" not in codes(diag)


def test_expecting_mps_on_a_mac_whose_macos_is_too_old_names_it_from_the_probe_facts() -> None:
    env = Environment(
        torch=TorchFacts(installed=True, version="2.11.0", other_accelerators={"mps": False}, mps_built=True),
        host=HostFacts(os_name="darwin", macos_version="13.6"),
    )

    diag = diagnose_env(env, expect_device="mps")

    assert diag.verdict.root_cause == "mps-unavailable"
    assert diag.findings[0].evidence["macos_needed"] == "14.0"


def test_a_build_without_mps_is_named() -> None:
    env = Environment(
        torch=TorchFacts(installed=True, version="2.4.1", other_accelerators={"mps": False}, mps_built=False),
        host=HostFacts(os_name="darwin", macos_version="14.4"),
    )

    f = diagnose_env(env, expect_device="mps").findings[0]

    assert f.code == "mps-unavailable"
    assert "built without MPS" in f.title


def test_the_version_named_in_prose_is_read_only_where_nothing_else_names_one() -> None:
    assert parse_environment_text(_MPS_ERROR_OLD_MACOS).torch.version == "2.5.1"
    text = "I use PyTorch 2.0 on this box\n>>> torch.__version__\n'2.3.1+cu121'\n"
    assert parse_environment_text(text).torch.version == "2.3.1+cu121"
