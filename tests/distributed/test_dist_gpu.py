"""The device-mapping findings on real GPUs: every rank on cuda:0, a checkpoint loaded without map_location, gloo for
CUDA tensors. Marked `gpu` (skipped without an NVIDIA GPU); the same findings are tested from saved records in
test_dist_rules.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
JOB = "tests/distributed/scripts/gpu_job.py"


def cuda_count() -> int:
    import torch

    return torch.cuda.device_count()


def triage(out: Path, ranks: int, *job_args: str) -> dict[str, dict[str, Any]]:
    cmd = [str(BIN / "torchrun"), "--standalone", f"--nproc_per_node={ranks}", "--no-python", str(BIN / "gputriage")]
    cmd += ["run", "--expect-device", "cuda", "--out", str(out), JOB, *job_args]
    job = subprocess.run(cmd, check=False, cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr[-3000:]
    doc = json.loads((out / "report.json").read_text())
    return {f["code"]: f for f in doc["findings"]}


def test_every_rank_on_cuda0_shares_one_gpu(tmp_path: Path) -> None:
    if cuda_count() < 2:
        pytest.skip("needs 2 GPUs: sharing one GPU is only a fault while another sits idle")
    share = triage(tmp_path, 2, "--cuda0", "--gloo")["ranks-share-gpu"]
    assert share["severity"] == "critical" and share["rank"] == 1
    assert share["evidence"]["ranks_by_device"] == {"cuda:0": [0, 1]}
    assert share["where"] is not None and share["where"].startswith(JOB)


def test_checkpoint_without_map_location_leaves_memory_on_gpu0(tmp_path: Path) -> None:
    if cuda_count() < 2:
        pytest.skip("needs 2 GPUs: rank 1 must own a GPU other than cuda:0")
    stray = triage(tmp_path / "out", 2, "--checkpoint", str(tmp_path / "ckpt.pt"))["stray-context-on-gpu"]
    assert stray["rank"] == 1 and "cuda:0" in stray["evidence"]["stray_bytes"]
    assert stray["where"] == f"{JOB}:33"


def test_gloo_for_cuda_tensors(tmp_path: Path) -> None:
    # Two ranks may share one GPU under gloo (nccl refuses), so this runs on a single-GPU machine too.
    findings = triage(tmp_path, 2, "--cuda0", "--gloo")
    assert findings["gloo-with-cuda"]["where"] == f"{JOB}:27"
