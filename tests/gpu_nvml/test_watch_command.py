"""`gputriage watch` through the real CLI, over every fake scenario (GPUTRIAGE_FAKE_NVML, as in the docs)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from gputriage import envnames
from gputriage.cli import main
from gputriage.diagnosis import gpu_device_verdicts
from gputriage.hardware.fake_scenarios import SCENARIOS
from gputriage.record.gpu import GpuSection
from gputriage.report.live import print_frame, run_live, sparkline

NO_NVML = {"driver_library_mismatch", "driver_not_loaded", "library_not_found", "no_gpu"}


def watch_json(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], scenario: str, *extra: str) -> Any:
    monkeypatch.setenv(envnames.FAKE_NVML, scenario)
    assert main(["watch", "--once", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - NO_NVML))
def test_watch_once_json_for_every_scenario(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    doc = watch_json(monkeypatch, capsys, scenario)
    assert doc["schema"] == "gputriage.report/1"
    assert doc["command"] == "watch"
    gpu = doc["gpu"]
    assert gpu["available"] is True and gpu["source"] == f"fake:{scenario}"
    assert all(d["verdict"] for d in gpu["devices"])
    lost = any(d["lost"] for d in gpu["devices"])  # a GPU NVML calls lost is rung 1's: it cannot be used
    assert [r["status"] for r in doc["ladder"]][:4] == ["warn" if lost else "skipped"] + ["skipped"] * 3
    assert all(f["rung"] == 5 or (lost and f["code"] == "cuda-init-failed") for f in doc["findings"])


def test_watch_once_json_idle_gpu_holding_memory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = watch_json(monkeypatch, capsys, "idle_memory_held")
    (dev,) = doc["gpu"]["devices"]
    assert dev["verdict"] == "idle while python train.py --epochs 90 (pid 4242) holds 76.0 GiB"
    assert dev["summary"]["util_sample_count"] == 120  # --once summarises the driver's last 20 s of readings
    assert dev["summary"]["util_zero_pct_of_samples"] == 100.0
    assert dev["util_recent_pct"] == [0.0] * 120
    assert doc["verdict"]["root_cause"] == "low-gpu-utilization"
    assert [f["code"] for f in doc["findings"]] == ["low-gpu-utilization", "gpu-memory-nearly-full"]


def test_watch_once_json_eight_gpus(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    doc = watch_json(monkeypatch, capsys, "eight_gpus")
    devices = doc["gpu"]["devices"]
    assert [d["index"] for d in devices] == list(range(8))
    assert {d["verdict"] for d in devices} == {"busy on paper: 100% util, but only 38% of SMs active"}


def test_watch_pid_follows_one_job(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    doc = watch_json(monkeypatch, capsys, "other_process_hog", "--pid", "4242")
    assert doc["gpu"]["job_pids"] == [4242]
    roles = {p["pid"]: p["role"] for p in doc["gpu"]["devices"][0]["processes"]}
    assert roles == {4242: "followed", 9001: None}
    assert "other-process-on-gpu" in [f["code"] for f in doc["findings"]]
    assert doc["argv"] == ["watch", "--interval", "1", "--once", "--json", "--pid", "4242"]


def test_watch_pid_that_does_not_exist(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "busy_a100")
    assert main(["watch", "--once", "--pid", "999999"]) == 2
    assert "no process with pid 999999" in capsys.readouterr().err


@pytest.mark.parametrize("scenario", sorted(NO_NVML))
def test_without_nvml_watch_says_why_in_one_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], scenario: str
) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, scenario)
    assert main(["watch", "--once", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("gputriage: error: ")
    assert "(rung 1: " in line


def test_a_version_mismatch_is_named_as_rung1_finding(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "driver_library_mismatch")
    assert main(["watch"]) == 2
    assert "Driver/library version mismatch) (rung 1: driver-library-mismatch)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["watch", "--interval", "0"], ["watch", "--json"]])
def test_bad_options_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "busy_a100")
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("gputriage: error: ")


def test_watch_once_terminal_frame(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "power_cap")
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["watch", "--once"]) == 0
    out = capsys.readouterr().out
    assert "GPU 0 · NVIDIA A100-PCIE-40GB" in out
    assert "→ throttled: power cap (1005 of 1410 MHz)" in out
    assert "python train.py --epochs 90" in out
    assert "gpu-throttled" in out


def test_fail_on_for_scripts(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "thermal_throttle")
    assert main(["watch", "--once", "--json", "--fail-on", "warning"]) == 1
    monkeypatch.setenv(envnames.FAKE_NVML, "busy_a100")
    assert main(["watch", "--once", "--json", "--fail-on", "warning"]) == 0
    capsys.readouterr()


def test_the_live_loop_redraws_each_tick() -> None:
    frames = iter([GpuSection(available=True), GpuSection(available=True), GpuSection(available=True)])
    drawn = []

    def next_frame() -> tuple[GpuSection, dict[int, str]]:
        section = next(frames)
        drawn.append(section)
        return section, gpu_device_verdicts(section)

    waits = iter([True, True, False])
    stream = io.StringIO()
    run_live(next_frame, lambda: next(waits), stream)
    assert len(drawn) == 3
    assert "no GPU to show" in stream.getvalue()


def test_frame_of_a_lost_gpu() -> None:
    from nvml_helpers import sample_scenario

    stream = io.StringIO()
    section = sample_scenario("gpu_lost")
    print_frame(section, gpu_device_verdicts(section), stream, width=100)
    out = stream.getvalue()
    assert "lost: GPU is lost" in out and "GPU 0 · NVIDIA A100-SXM4-80GB" in out


def test_sparkline() -> None:
    assert sparkline([0.0, 50.0, 100.0, None]) == "▁▅█ "
    assert len(sparkline([10.0] * 100)) == 40


def test_rung1_code_of_an_nvml_start_failure() -> None:
    from gputriage.commands.watch import rung1_code
    from gputriage.hardware.nvml import Unavailable

    assert rung1_code(Unavailable("Driver/library version mismatch", 18), pci_gpus=1) == "driver-library-mismatch"
    assert rung1_code(Unavailable("Driver Not Loaded", 9), pci_gpus=2) == "driver-not-loaded"
    assert rung1_code(Unavailable("NVML Shared Library Not Found", 12), pci_gpus=0) == "no-gpu-visible"


def in_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What `gputriage ARGV` shows in a terminal (a pty), without its colour codes."""
    import os
    import re
    import subprocess
    import sys

    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gputriage", *argv], stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    proc.wait(timeout=60)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode()).replace("\r\n", "\n")


def test_the_docs_show_real_output() -> None:
    """docs/watch.md shows `watch --once` as a 100-column terminal shows it."""
    import os
    from pathlib import Path

    # The README text lives in docs/watch.md until it is merged into README.md; check wherever it is.
    root = Path(__file__).resolve().parents[2]
    command = "$ GPUTRIAGE_FAKE_NVML=idle_memory_held gputriage watch --once\n"
    texts = [p.read_text() for p in (root / "docs" / "watch.md", root / "README.md") if p.is_file()]
    text = next((t for t in texts if command in t), None)
    if text is None:
        pytest.skip("no document shows the watch example")
    start = text.index(command) + len(command)
    shown = text[start : text.index("\n```", start)]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TERM": "xterm-256color",
        "COLUMNS": "100",
        envnames.FAKE_NVML: "idle_memory_held",
    }
    assert in_a_terminal(["watch", "--once"], env).rstrip("\n") == shown


def test_a_multi_gpu_node_gets_one_row_per_gpu(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(envnames.FAKE_NVML, "eight_gpus")
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["watch", "--once"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if "H100 80GB HBM3" in line and "GiB / 80.0 GiB" in line]
    assert len(rows) == 8
    assert [line for line in lines if line.startswith("GPU 7 → ")] == [
        "GPU 7 → busy on paper: 100% util, but only 38% of SMs active"
    ]
    assert sum("/usr/bin/python3 -u train.py" in line for line in lines) == 8


def test_a_lost_gpu_is_a_finding_and_fails_the_guard(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: `watch --once --json` on a GPU that fell off the bus said healthy, with no finding, and `--fail-on
    warning` exited 0 (a CI guard passed the node)."""
    doc = watch_json(monkeypatch, capsys, "gpu_lost")
    (finding,) = [f for f in doc["findings"] if f["code"] == "cuda-init-failed"]
    assert finding["severity"] == "warning" and finding["evidence"]["lost_gpus"].startswith("1 ")
    assert doc["verdict"]["status"] != "healthy"
    assert main(["watch", "--once", "--fail-on", "warning"]) == 1
    # the terminal shows the finding the exit code acts on (a trial: exit 1 for a finding no line of the panel showed)
    assert "warning · rung 1 · cuda-init-failed" in capsys.readouterr().out
