"""`gputriage env` as a user runs it: this machine, a fake GPU, --expect-device, --fail-on, --out, and bad input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from env_fixtures import run_env_json

from gputriage.cli import main
from gputriage.commands.common import device_name

NO_GPU_HERE = not Path("/dev/nvidiactl").exists()


NO_GPU_ROOTS = ("no-gpu-visible", "container-without-gpu")


def _torch_is_cpu_build() -> bool:
    import torch

    return torch.version.cuda is None and torch.version.hip is None


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA GPU")
def test_this_machine_has_no_gpu_and_says_so_in_plain_words(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_env_json(capsys, "--expect-device", "cuda")

    assert code == 0
    assert doc["verdict"]["status"] == "idle"
    # Inside a container the container finding may come first (issue #14 folds the two into one answer).
    assert doc["verdict"]["root_cause"] in NO_GPU_ROOTS
    top = next(f for f in doc["findings"] if f["code"] == "no-gpu-visible")
    assert top["severity"] == "critical"
    assert top["title"].startswith("This machine has no NVIDIA GPU")
    assert top["evidence"]["nvidia_device_nodes"] == 0
    assert doc["ladder"][0]["status"] == "fail"
    others = {f["code"]: f["severity"] for f in doc["findings"] if f["code"] not in NO_GPU_ROOTS}
    assert others.get("cpu-only-build", "info") == "info"  # with no GPU, a CPU build is at most info
    # One machine, one answer: no container finding on top of "no GPU" (the host has none either: PCI says 0).
    assert [f["code"] for f in doc["findings"] if f["severity"] == "critical"] == ["no-gpu-visible"]
    assert doc["environment"]["torch"]["installed"] is True
    assert doc["environment"]["host"]["python_version"]


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA GPU")
def test_env_and_run_give_this_machine_the_same_rung_1_answer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if not _torch_is_cpu_build():
        pytest.skip("needs the CPU build of torch")
    script = tmp_path / "job.py"
    script.write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", "--out", str(out), str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    run_doc = json.loads((out / "report.json").read_text())
    _, env_doc = run_env_json(capsys)

    def rung_one(doc: dict[str, Any]) -> list[tuple[str, str]]:
        return [(f["code"], f["severity"]) for f in doc["findings"] if f["rung"] == 1]

    assert rung_one(env_doc) == rung_one(run_doc)
    assert rung_one(env_doc)[0] == ("no-gpu-visible", "info")  # nothing to use: judged for the CPU, like `run`
    # `env`'s subject is this machine: nothing stops a CPU job, a pass; a job judged for the CPU asks nothing of a
    # GPU, so `run` leaves rung 1 "not judged" (a trial read run's "✓ pass" beside the notes as "the GPU is fine")
    assert env_doc["ladder"][0]["status"] == "pass"
    assert run_doc["ladder"][0]["status"] == "skipped"
    assert run_doc["ladder"][0]["reason"].startswith("not judged: this torch reaches no GPU here")
    assert "judged for the CPU" in env_doc["verdict"]["summary"]


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA GPU")
def test_terminal_report_puts_the_verdict_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--expect-device", "cuda"]) == 0

    out = capsys.readouterr().out
    root = out.index("root cause: no-gpu-visible" if "root cause: no-gpu-visible" in out else "root cause: container")
    assert out.index("gputriage verdict: IDLE") < root < out.index("fix:")


def test_a_cpu_build_next_to_an_a100_is_the_root_cause(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _torch_is_cpu_build():
        pytest.skip("needs the CPU build of torch")
    monkeypatch.setenv("GPUTRIAGE_FAKE_NVML", "healthy_a100")

    code, doc = run_env_json(capsys)

    assert code == 0
    assert doc["verdict"]["root_cause"] == "cpu-only-build"
    top = doc["findings"][0]
    assert top["severity"] == "critical"
    assert top["evidence"]["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert "--index-url https://download.pytorch.org/whl/cu126" in top["fix"]
    assert "no-gpu-visible" not in [f["code"] for f in doc["findings"]]


def test_a_job_meant_for_meta_has_no_critical_finding(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_env_json(capsys, "--expect-device", "meta", "--fail-on", "critical")

    assert code == 0
    assert all(f["severity"] == "info" for f in doc["findings"])
    assert doc["expect_device"] == "meta"
    assert doc["verdict"]["root_cause"] is None


@pytest.mark.skipif(not NO_GPU_HERE, reason="this machine has an NVIDIA GPU")
def test_fail_on_critical_exits_1_and_out_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["env", "--expect-device", "cuda", "--fail-on", "critical", "--out", str(tmp_path / "out")])
    capsys.readouterr()

    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert code == 1
    assert saved["verdict"]["root_cause"] in NO_GPU_ROOTS
    assert saved["environment"]["source"] == "probe"


def test_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pasted = "$ nvidia-smi\nFailed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.127\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pasted.encode())))

    code, doc = run_env_json(capsys, "--from", "-")

    assert code == 0
    assert doc["verdict"]["root_cause"] == "driver-library-mismatch"
    assert doc["findings"][0]["evidence"]["library_version"] == "550.127"
    assert (
        "could not tell the torch version (python -c 'import torch; print(torch.__version__)')"
        in (doc["environment"]["unknown"])
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the text is empty"),
        (b"   \n\n", "the text is empty"),
        (bytes(range(256)) * 8, "looks binary"),
        ("\ufffd".encode() * 50 + b"\x01\x02\x03" * 40, "looks binary"),
        (b"My training is slow, please help, thanks!", "found no PyTorch, CUDA or nvidia-smi facts"),
    ],
)
def test_bad_text_gives_one_clear_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    path = tmp_path / "report.txt"
    path.write_bytes(content)

    code = main(["env", "--from", str(path)])

    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.count("\n") == 1 and err.startswith("gputriage: error: ")


@pytest.mark.parametrize(
    ("name", "message"), [("missing.txt", "cannot read missing.txt: "), (".", ". is a directory, not a regular file")]
)
def test_a_path_that_cannot_be_read_gives_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)

    code = main(["env", "--from", name])

    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"gputriage: error: {message}")
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", [["env"], ["trace", "t.json"], ["run", "train.py"]])
@pytest.mark.parametrize("device", ["gpu please", "gpu", "banana", "GPU", "cuda:x"])
def test_a_device_torch_does_not_know_gives_exit_2(
    command: list[str], device: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A fresh-clone tester found `env --expect-device gpu` judged a broken set-up HEALTHY ("meant to run on gpu").
    assert main([*command[:1], "--expect-device", device, *command[1:]]) == 2
    err = capsys.readouterr().err
    assert f"expected a device torch knows (cuda, cuda:1, mps, xpu, meta, cpu), not {device!r}" in err
    assert ("torch calls NVIDIA and AMD GPUs cuda" in err) == (device.split(":", maxsplit=1)[0].lower() == "gpu")


@pytest.mark.parametrize("device", ["cuda", "cuda:1", "cpu", "meta", "mps", "xpu", "npu", "hpu"])
def test_devices_torch_knows_are_taken(device: str) -> None:
    assert device_name(device) == device


def test_the_console_script_prints_no_traceback_on_garbage(tmp_path: Path) -> None:
    path = tmp_path / "garbage.bin"
    path.write_bytes(b"\x00\xff" * 100)

    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "env", "--from", str(path)], capture_output=True, text=True, check=False
    )

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        == f"gputriage: error: {path} looks binary, not text: give a collect_env / nvidia-smi text file"
    )


@pytest.mark.gpu
def test_a_real_gpu_machine_lists_the_gpus_nvidia_smi_lists(capsys: pytest.CaptureFixture[str]) -> None:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
    gpus = [line for line in listed.splitlines() if line.startswith("GPU ")]

    code, doc = run_env_json(capsys, "--expect-device", "cuda")

    assert code == 0
    assert len(doc["environment"]["driver"]["devices"]) == len(gpus)
    assert doc["verdict"]["root_cause"] not in {"no-gpu-visible", "driver-not-loaded", "container-without-gpu"}


def test_an_inconclusive_paste_follows_the_contract_in_every_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A paste that does not say what rung 1 needs: `inconclusive`, rung 1 skipped with its reason, the next command
    to paste; the same in JSON, the terminal, Markdown and HTML."""
    from contract import LADDER_FIELDS, LADDER_STATUSES, VERDICT_FIELDS, VERDICT_STATUSES

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b">>> torch.cuda.is_available()\nFalse\n")))
    code, doc = run_env_json(capsys, "--from", "-", "--out", str(tmp_path))

    assert code == 0
    assert tuple(doc["verdict"]) == VERDICT_FIELDS and doc["verdict"]["status"] in VERDICT_STATUSES
    assert doc["verdict"]["status"] == "inconclusive" and doc["verdict"]["root_cause"] is None
    assert "Paste the output of `" in doc["verdict"]["summary"]
    for rung in doc["ladder"]:
        assert tuple(rung) == LADDER_FIELDS and rung["status"] in LADDER_STATUSES
        assert (rung["reason"] is None) == (rung["status"] != "skipped")
    assert doc["ladder"][0]["status"] == "skipped" and doc["ladder"][0]["reason"].startswith("not measured: ")
    reason = doc["ladder"][0]["reason"]
    assert reason in (tmp_path / "report.md").read_text()
    assert "verdict-inconclusive" in (tmp_path / "report.html").read_text()

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b">>> torch.cuda.is_available()\nFalse\n")))
    assert main(["env", "--from", "-"]) == 0
    terminal = " ".join(capsys.readouterr().out.split())
    assert "INCONCLUSIVE" in terminal and "not measured" in terminal
