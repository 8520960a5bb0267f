"""Every real report in the corpus is diagnosed to its known root cause (the `### root cause` labels)."""

from __future__ import annotations

from pathlib import Path

import pytest
from env_fixtures import corpus_text, run_env_json

# file -> the catalogue code of the root cause stated in the thread (see corpus/envs/INDEX.md)
EXPECTED = {
    "001.txt": "arch-not-supported",  # RTX 5090 D sm_120 on torch 2.6.0+cu126
    "002.txt": "cpu-only-build",  # conda cpuonly on 2x RTX 3090
    "003.txt": "cuda-init-failed",  # CUDA unknown error (999) after suspend/resume
    "005.txt": "arch-not-supported",  # sm_86 on a cudatoolkit=10.2 build
    "007.txt": "cuda-init-failed",  # Error 804, container toolkit mounting forward-compat libs on a GTX 1650
    "009.txt": "driver-too-old",  # driver 410.48 for the CUDA 10.1 wheel of torch 1.3.0
    "013.txt": "arch-not-supported",  # cc 5.0 dropped from the 0.3.1 Windows build
    "015.txt": "arch-not-supported",  # cc 3.5 below the build's minimum 3.7
    "016.txt": "cuda-visible-devices",  # CUDA_VISIBLE_DEVICES=2 on a one-GPU box
    "017.txt": "cuda-visible-devices",  # UUIDs in CUDA_VISIBLE_DEVICES on torch 1.13
    "019.txt": "container-without-gpu",  # plain `docker run`, no --gpus
    "022.txt": "driver-library-mismatch",  # driver upgraded without a reboot
    "024.txt": "cuda-init-failed",  # cupy initialised the (ROCm) device before torch
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_report_is_diagnosed_to_its_root_cause(
    name: str, corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = corpus / "envs" / name
    if not source.exists():
        pytest.skip(f"{name} is not in this copy of the corpus")
    pasted = tmp_path / name
    pasted.write_text(corpus_text(source))

    code, doc = run_env_json(capsys, "--from", str(pasted))

    assert code == 0
    assert doc["verdict"]["root_cause"] == EXPECTED[name], [(f["code"], f["title"]) for f in doc["findings"]]
    top = doc["findings"][0]
    assert top["severity"] == "critical"
    assert top["evidence"], "the root cause must carry its evidence"
    assert top["fix"].strip()
    assert not top["title"].endswith(".")
    assert doc["environment"]["source"] == "text"


def test_every_corpus_report_has_a_label(corpus: Path) -> None:
    files = {p.name for p in (corpus / "envs").glob("*.txt")}
    assert files, "the env corpus is empty"
    assert files <= set(EXPECTED), f"label these reports in EXPECTED: {sorted(files - set(EXPECTED))}"


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
        pasted.write_text(corpus_text(source))
        _, doc = run_env_json(capsys, "--from", str(pasted))
        assert expected in doc["findings"][0]["fix"], (name, doc["findings"][0]["fix"])
