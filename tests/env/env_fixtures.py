"""Building blocks for the env tests: a fake machine laid out in a folder, CUDA torch facts, running the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gputriage.cli import main
from gputriage.collectors.env_probe import probe_environment
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.hardware.fake import FakeNvml
from gputriage.record import Run
from gputriage.record.environment import Environment, TorchFacts


def fake_root(
    tmp: Path,
    *,
    gpus: int = 0,
    pci_gpus: int | None = None,
    kernel_driver: str | None = None,
    docker: bool = False,
    wsl: bool = False,
    cgroup: str = "0::/\n",
) -> Path:
    """A machine's files: /dev/nvidia*, /proc/driver/nvidia, the PCI bus (GPU + its HDMI audio), container marks."""
    root = tmp / "root"
    (root / "dev").mkdir(parents=True)
    (root / "proc" / "1").mkdir(parents=True)
    (root / "proc" / "1" / "cgroup").write_text(cgroup)
    (root / "proc" / "version").write_text(
        "Linux version 6.8.0-microsoft-standard-WSL2" if wsl else "Linux version 6.8"
    )
    if gpus:
        for name in ["nvidiactl", "nvidia-uvm", *(f"nvidia{i}" for i in range(gpus))]:
            (root / "dev" / name).write_text("")
    if kernel_driver:
        version = root / "proc" / "driver" / "nvidia" / "version"
        version.parent.mkdir(parents=True)
        version.write_text(f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {kernel_driver}  Sun Jan 1 2024\n")
    pci = root / "sys" / "bus" / "pci" / "devices"
    pci.mkdir(parents=True)
    for i in range(gpus if pci_gpus is None else pci_gpus):
        for function, device_class in (("0", "0x030200"), ("1", "0x040300")):  # the GPU, then its audio function
            dev = pci / f"0000:{0x10 + i:02x}:00.{function}"
            dev.mkdir()
            (dev / "vendor").write_text("0x10de\n")
            (dev / "class").write_text(f"{device_class}\n")
    if docker:
        (root / ".dockerenv").write_text("")
    return root


def cuda_torch(version: str = "2.6.0+cu124", cuda: str | None = "12.4", **kw: Any) -> TorchFacts:
    """What the torch probe reports for a CUDA build that works."""
    facts = TorchFacts(
        installed=True,
        version=version,
        cuda_version=cuda,
        is_cpu_build=cuda is None,
        is_available=cuda is not None,
        device_count=1 if cuda else 0,
        install_method="pip",
        probe_mode="in-process",
    )
    for key, value in kw.items():
        setattr(facts, key, value)
    return facts


def probe_fake(
    tmp: Path,
    lib: FakeNvml,
    torch: TorchFacts,
    *,
    environ: dict[str, str] | None = None,
    **root_kw: Any,
) -> Environment:
    return probe_environment(
        nvml_lib=lib, host_root=fake_root(tmp, **root_kw), environ=environ or {}, torch_facts=torch
    )


def diagnose_env(env: Environment, expect_device: str | None = None) -> Diagnosis:
    return diagnose(Run(command="env", expect_device=expect_device, environment=env))


def codes(diag: Diagnosis) -> list[str]:
    return [f.code for f in diag.findings]


def finding(diag: Diagnosis, code: str) -> Any:
    return next(f for f in diag.findings if f.code == code)


def run_env_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """`gputriage env --json ARGV...` in-process; returns the exit code and the JSON document."""
    code = main(["env", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def top_of_text(text: str) -> tuple[str, str, str, str]:
    """A pasted report's verdict status, and its first warning or critical finding's code, title and fix ("" each
    where there is none)."""
    from gputriage.commands.env import diagnose_text

    diagnosis = diagnose_text(text)
    found = [f for f in diagnosis.findings if f.severity.value != "info"]
    top = found[0] if found else None
    return diagnosis.verdict.status, top.code if top else "", top.title if top else "", top.fix if top else ""
