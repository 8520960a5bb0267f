"""`gputriage env --from` on what an eighth trial of 30 fresh reports found misread: a `docker run` continued over
lines, markdown around a setting's value, a Windows user's shell, a device-side assert (torch ran kernels), an Intel
Arc Pro card, and Mac reports about MPS (an `=>` answer, `- torch: X` in a list, every requirement met, MPS named with
no answer). Each text is our own, in the shape of what people paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text


def test_a_gpu_flag_on_a_continuation_line_is_part_of_the_docker_command() -> None:
    """vllm#18995: `docker run --rm \\` then `    --gpus all \\`: the top finding was "started without --gpus"."""
    text = (
        "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
        "docker run --rm \\\n    -v /data:/data \\\n    --gpus all \\\n    vllm/vllm-openai:latest --model x\n"
    )
    assert parse_environment_text(text).host.container_gpu_requested is True
    assert all(f.code != "container-without-gpu" for f in diagnose_text(text).findings)
    alone = "docker run --rm \\\n    -v /data:/data \\\n    vllm/vllm-openai:latest\ntorch.cuda.is_available() False\n"
    assert parse_environment_text(alone).host.container_gpu_requested is False


def test_markdown_emphasis_is_not_part_of_a_settings_value() -> None:
    """ComfyUI#13695: `3. **System-level CUDA_VISIBLE_DEVICES=-1**: Must force-override to 0` was read as '-1**:'."""
    text = "- **OS**: Windows 11\n- **PyTorch**: 2.11.0+cu130\n3. **System-level CUDA_VISIBLE_DEVICES=-1**: override\n"
    env = parse_environment_text(text)
    assert env.env_vars["CUDA_VISIBLE_DEVICES"] == "-1"
    top = diagnose_text(text).findings[0]
    assert top.code == "cuda-visible-devices"
    # a Windows machine: cmd / PowerShell, and the variable set for every program, not bash's export
    assert "set CUDA_VISIBLE_DEVICES=" in top.fix and "$env:CUDA_VISIBLE_DEVICES" in top.fix
    assert "export " not in top.fix


def test_a_device_side_assert_is_not_a_rung_one_cause() -> None:
    """AerialDetection#34: a label out of range raised "device-side assert triggered"; the report was refused (exit
    2, no facts). The kernel ran on the GPU: rung 1 is fine."""
    text = "RuntimeError: copy_if failed to synchronize: device-side assert triggered\nMay i ask how to solve?\n"
    diagnosis = diagnose_text(text)
    assert diagnosis.verdict.status == "healthy"
    assert "device-side assert triggered" in diagnosis.verdict.summary


def test_an_intel_arc_pro_card_is_a_gpu_named() -> None:
    """pytorch#189811: "Intel Arc Pro B70" and "PyTorch XPU" were refused as holding no fact."""
    text = "Done spent 12 hours getting Intel Arc Pro B70 working on Ubuntu. Got PyTorch XPU loaded.\n"
    env = parse_environment_text(text)
    assert env.host.other_gpus == ["Intel Arc Pro B70"]
    assert "whl/xpu" in diagnose_text(text).findings[0].fix


_MAC = (
    "In a session on macOS 26.2 (Apple M3), PyTorch MPS reports unavailable.\n"
    "- Python: 3.12.11 (arm64) in .venv\n- torch: 2.11.0.dev20260129 (also tested 2.10.0)\n"
    "- torch.backends.mps.is_built() => True\n- torch.backends.mps.is_available() => False\n"
)


def test_an_mps_report_that_meets_every_requirement_points_outside_torch() -> None:
    """codex#10199: MPS blocked by an agent's sandbox. The `=>` answers and `- torch: X` were not read, and the
    verdict was "a Mac has no NVIDIA driver: use MPS", which is what failed."""
    env = parse_environment_text(_MAC)
    assert (env.torch.version, env.torch.mps_built, env.torch.other_accelerators) == ("2.11.0", True, {"mps": False})
    top = diagnose_text(_MAC).findings[0]
    assert top.code == "mps-unavailable"
    assert "something outside torch" in top.title and "sandbox" in top.fix


def test_a_mac_report_that_names_mps_without_its_answer_is_inconclusive_not_cuda() -> None:
    """Lightning#17667: an Intel Mac whose MPS works, refused by a framework. The report names MPS and gives no
    answer; it was judged for CUDA ("a Mac has no NVIDIA driver")."""
    text = "As of macOS 12.3, MPS is supported on Intel.\nreturn torch.backends.mps.is_available() and arm\n"
    diagnosis = diagnose_text(text)
    assert diagnosis.verdict.status == "inconclusive"
    assert "torch.backends.mps.is_available()" in diagnosis.verdict.summary
    assert all(f.severity.value == "info" for f in diagnosis.findings)
