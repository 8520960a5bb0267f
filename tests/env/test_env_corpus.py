"""Every labelled report (tests/data/envs, and the shared corpus when present) is diagnosed to the cause its thread
settled on, and no report whose thread found a problem is ever called healthy.

The known misses are listed with why: they are reports whose text does not hold the facts that decide (a prose-only
question, a conda-forge solve that only the fix reveals). They must still never read "healthy". A miss that gets fixed
fails this test until it is removed from the list, so the list cannot go stale.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from env_corpus import NO_CAUSE, Report, all_reports, diagnose_report, own_reports, pasted_text, shared_reports
from env_fixtures import run_env_json

KNOWN_MISSES = {
    # conda-forge's solve gave a CPU build: only the thread's fix shows it; the text is honestly inconclusive.
    "envs/074.txt": "inconclusive",
    # a SLURM job without a GPU allocated: nvidia-smi's "couldn't communicate" reads as a driver not loaded.
    "envs/090.txt": "idle",
    # prose only ("my driver does not support the pytorch-gpu version"): nothing to measure; inconclusive.
    "envs/092.txt": "inconclusive",
    # the GPU (RTX 4090) and the torch pin appear only in prose; inconclusive.
    "envs/097.txt": "inconclusive",
}


def _reports() -> list[Report]:
    return all_reports()


@pytest.mark.parametrize("report", _reports(), ids=lambda r: r.name)
def test_report_is_diagnosed_to_the_cause_its_thread_settled_on(report: Report) -> None:
    outcome = diagnose_report(report)

    assert not outcome.healthy_on_a_problem(report.expected), f"healthy on a problem thread: {outcome.detail}"
    if report.name in KNOWN_MISSES:
        assert outcome.predicted() != report.expected, "fixed: remove it from KNOWN_MISSES"
        assert outcome.status == KNOWN_MISSES[report.name]
        return
    assert outcome.predicted() == report.expected, outcome.detail


def test_the_own_corpus_is_large_labelled_and_sourced() -> None:
    reports = own_reports()
    codes = {r.expected for r in reports}

    assert len(reports) >= 80
    assert all(r.source and r.source.startswith("https://") for r in reports)
    rung_one = {
        "torch-not-installed", "no-gpu-visible", "container-without-gpu", "driver-not-loaded",
        "driver-library-mismatch", "cpu-only-build", "driver-too-old", "cuda-visible-devices",
        "arch-not-supported", "cuda-init-failed",
    }  # fmt: skip
    assert rung_one <= codes, f"uncovered rung-1 codes: {sorted(rung_one - codes)}"
    assert NO_CAUSE in codes  # reports where rung 1 was not the problem


def test_every_shared_report_has_a_label(corpus: Path) -> None:
    files = {p.name for p in (corpus / "envs").glob("*.txt")}
    labelled = {r.path.name for r in shared_reports(corpus / "envs")}
    assert files, "the env corpus is empty"
    assert files <= labelled, f"label these reports in tests/data/envs/shared-labels.tsv: {sorted(files - labelled)}"


def test_fixes_are_the_exact_commands_the_maintainers_gave(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expectations = {
        # 470 supports CUDA <= 11.4; torch 1.8 ships cu101/cu102/cu111: the newest the driver runs is cu111.
        "002.txt": "python -m pip install torch==1.8.1+cu111 -f https://download.pytorch.org/whl/torch_stable.html",
        # the maintainer: "you'll need to update it to at least 418.39"
        "009.txt": ">= 418.39",
        "022.txt": "sudo reboot",
        "003.txt": "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm",
        # sm_86 needs CUDA >= 11.1: the reporter's fix was the CUDA 11 build of the same nightly line.
        "005.txt": "cudatoolkit=11.1",
    }
    for name, expected in expectations.items():
        source = corpus / "envs" / name
        if not source.exists():
            continue
        pasted = tmp_path / name
        pasted.write_text(pasted_text(source))
        _, doc = run_env_json(capsys, "--from", str(pasted))
        assert expected in doc["findings"][0]["fix"], (name, doc["findings"][0]["fix"])
