"""`env --from` on hostile input (issue #13): one clear line and exit 2, never a traceback or a hang, bounded work,
control characters never sent raw to the terminal while the JSON keeps them exact."""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path

import pytest
from env_fixtures import run_env_json

from gputriage.cli import main
from gputriage.collectors.env_text import parse_environment_text
from gputriage.errors import InputError

MiB = 1 << 20


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("gputriage: error: ") and err.count("\n") == 1, err
    return err


def test_a_fifo_is_refused_at_once_without_blocking(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "report.txt"
    os.mkfifo(fifo)  # nobody ever writes to it: opening it for reading the usual way blocks forever
    done: list[int] = []
    worker = threading.Thread(target=lambda: done.append(main(["env", "--from", str(fifo)])), daemon=True)

    worker.start()
    worker.join(timeout=20)

    assert done == [2], "env --from blocked on a FIFO"
    assert "a FIFO (named pipe), not a regular file" in _one_error_line(capsys)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_is_refused(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--from", device]) == 2
    assert "is a device, not a regular file" in _one_error_line(capsys)


def test_a_socket_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # AF_UNIX paths are short
    with socket.socket(socket.AF_UNIX) as server:
        server.bind("s")
        assert main(["env", "--from", "s"]) == 2
    assert "s is a socket, not a regular file" in _one_error_line(capsys)


def test_a_file_over_16_mib_is_refused_before_it_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.txt"
    with big.open("wb") as handle:
        handle.truncate(16 * MiB + 1)  # sparse: nothing is written, so a read would take the whole 16 MiB

    assert main(["env", "--from", str(big)]) == 2
    assert "too large for a pasted report" in _one_error_line(capsys)


@pytest.mark.parametrize(
    "text",
    [
        "PyTorch version: 2.1.0\nCUDA used to build PyTorch: 2.²\nIs CUDA available: False\n",
        "Nvidia driver version: " + "9" * 5000 + "\nIs CUDA available: False\n",
        "GPU " + "7" * 5000 + ": NVIDIA A100\n>>> torch.cuda.device_count()\n" + "3" * 5000 + "\n",
        "PyTorch version: " + "1." * 3000 + "\nCUDA used to build PyTorch: 12.1\n",
        "|   " + "9" * 5000 + "  NVIDIA A100   On  | 00000000:07:00.0 Off |\nDriver Version: 550.1  CUDA Version: 12.4",
        "RuntimeError: The NVIDIA driver on your system is too old (found version " + "1" * 5000 + ").\n",
        "Error " + "8" * 5000 + ": forward compatibility was attempted on non supported HW\n",
        "CUDA_VISIBLE_DEVICES=" + "1," * 3000 + " python train.py\n>>> torch.cuda.is_available()\nFalse\n",
        "Found GPU" + "0" * 5000 + " GeForce GTX 770 which is of cuda capability 3.0.\n",
    ],
)
def test_huge_and_unicode_numbers_never_raise(text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pasted = tmp_path / "report.txt"
    pasted.write_text(text)

    code = main(["env", "--json", "--from", str(pasted)])
    out, err = capsys.readouterr()

    if code == 2:  # nothing usable was left once the monster numbers were dropped: one line, like any bad input
        assert not out and err.startswith("gputriage: error: ") and err.count("\n") == 1, err
        return
    assert code == 0, err
    doc = json.loads(out)
    assert doc["verdict"]["status"] in ("idle", "underused", "healthy", "inconclusive")
    for value in json.dumps(doc["environment"]).split('"'):
        assert len(value) <= 400, "a string from the text was kept uncapped"


def test_control_characters_reach_the_json_exactly_and_the_terminal_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = "\x1b]0;evil\x07\x1b[2J"
    pasted = tmp_path / "report.txt"
    pasted.write_text(
        f"PyTorch version: 2.1.0+cpu\nGPU models and configuration: GPU 0: NVIDIA RTX 4090{evil}\n"
        f"Is CUDA available: False\nCUDA_VISIBLE_DEVICES=0{evil} python train.py\n"
    )

    _, doc = run_env_json(capsys, "--from", str(pasted))
    assert main(["env", "--from", str(pasted)]) == 0
    terminal = capsys.readouterr().out

    assert doc["environment"]["driver"]["devices"][0]["name"].endswith(evil)  # the JSON keeps what was read
    assert "\x1b]" not in terminal and "\x07" not in terminal and "\x1b[2J" not in terminal
    assert "\\x1b]0;evil\\x07" in terminal  # shown, as an escape


def test_a_16_mib_adversarial_text_is_parsed_in_bounded_time() -> None:
    """Blank-line runs, long lines and repeated prefixes: the shapes that make `^\\s*...` MULTILINE patterns
    quadratic. The bound below is a hang guard, not a timing claim (bench/env_accuracy.py reports speed)."""
    part = 5 * MiB + 256 * 1024
    text = (
        "x" + "\n" * part
        + ("CUDA used to build PyTorch: " + "2." * 2000 + "\n") * (part // 4030)
        + ("torch.cuda.is_available() returns " * 20 + "\n") * (part // 700)
        + "PyTorch version: 2.1.0+cpu\n"
    )  # fmt: skip
    assert len(text) > 15 * MiB
    outcome: list[object] = []
    worker = threading.Thread(target=lambda: outcome.append(_parse(text)), daemon=True)

    worker.start()
    worker.join(timeout=120)

    assert outcome, "parsing a 16 MiB adversarial text did not finish"


def _parse(text: str) -> object:
    try:
        return parse_environment_text(text)
    except InputError as exc:
        return exc
