"""Host facts read from a fake machine laid out in a folder: device nodes, the kernel driver, PCI, containers, WSL."""

from __future__ import annotations

from pathlib import Path

from env_fixtures import fake_root

from gputriage.collectors.host import probe_host, read_env_vars


def test_a_gpu_machine(tmp_path: Path) -> None:
    facts = probe_host(fake_root(tmp_path, gpus=2, kernel_driver="550.54.15"), {})

    assert facts.dev_nodes == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    assert facts.proc_driver_version == "550.54.15"
    assert facts.pci_nvidia_devices == 2  # the two HDMI audio functions with the same vendor id are not GPUs
    assert facts.in_container is False and facts.container_kind is None
    assert facts.wsl is False


def test_containers_are_recognised(tmp_path: Path) -> None:
    docker = probe_host(fake_root(tmp_path / "d", docker=True), {})
    k8s = probe_host(fake_root(tmp_path / "k"), {"KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    cgroup_v1 = probe_host(fake_root(tmp_path / "c", cgroup="12:pids:/kubepods/besteffort/pod1234\n"), {})
    podman = fake_root(tmp_path / "p")
    (podman / "run").mkdir()
    (podman / "run" / ".containerenv").write_text("")

    assert (docker.in_container, docker.container_kind) == (True, "docker")
    assert k8s.container_kind == "kubernetes"
    assert cgroup_v1.container_kind == "kubernetes"
    assert probe_host(podman, {}).container_kind == "podman"


def test_wsl_reaches_the_gpu_through_dxg(tmp_path: Path) -> None:
    root = fake_root(tmp_path, wsl=True)
    (root / "dev" / "dxg").write_text("")

    facts = probe_host(root, {})

    assert facts.wsl is True
    assert facts.dev_nodes == ["/dev/dxg"]


def test_an_unreadable_pci_bus_is_unknown_not_zero(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    for entry in (root / "sys" / "bus" / "pci" / "devices").iterdir():
        entry.rmdir()
    (root / "sys" / "bus" / "pci" / "devices").rmdir()

    assert probe_host(root, {}).pci_nvidia_devices is None


def test_env_vars_are_kept_even_when_empty() -> None:
    got = read_env_vars({"CUDA_VISIBLE_DEVICES": "", "CUDA_LAUNCH_BLOCKING": "1", "HOME": "/root"})

    assert got == {"CUDA_VISIBLE_DEVICES": "", "CUDA_LAUNCH_BLOCKING": "1"}
