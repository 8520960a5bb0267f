"""Every GPUTRIAGE_* variable and every numeric or path flag of every command: a bad value is one line on stderr and
exit 2, never a traceback, and nothing runs (`demo --steps 0` used to crash the bundled script and report HEALTHY)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage import envnames
from gputriage.cli import COMMANDS, build_parser, main
from gputriage.commands import common
from gputriage.commands.settings import VARIABLES, check_environment
from gputriage.errors import InputError

SRC = Path(__file__).resolve().parents[2] / "src" / "gputriage"
# Strings that look like variables but are not read from the environment: the torch probe's output marker.
NOT_VARIABLES = {"GPUTRIAGE_TORCH_PROBE"}
BAD_VALUES = {
    "GPUTRIAGE_FAKE_NVML": ["no_such_scenario", "busy a100"],
    "GPUTRIAGE_FAKE_JOB_PID": ["me", "-1", "0"],
    "GPUTRIAGE_MERGE_WAIT_S": ["soon", "-5", "nan", "inf"],
    "GPUTRIAGE_DDP_COMM_TIMING": ["yes", "2"],
    "GPUTRIAGE_DEMO_DEVICE": ["GPU 0", "cuda:x"],
    "GPUTRIAGE_MAX_RECORD_MB": ["big", "0", "-3", "99999999"],
    "GPUTRIAGE_REPORT_WORKER": ["off", "2"],
    "GPUTRIAGE_PURE_PYTHON": ["yes", "true"],
}
GOOD_VALUES = {
    "GPUTRIAGE_FAKE_NVML": "busy_a100",
    "GPUTRIAGE_FAKE_JOB_PID": "self",
    "GPUTRIAGE_MERGE_WAIT_S": "0.5",
    "GPUTRIAGE_DDP_COMM_TIMING": "0",
    "GPUTRIAGE_DEMO_DEVICE": "cuda:1",
    "GPUTRIAGE_MAX_RECORD_MB": "512",
    "GPUTRIAGE_REPORT_WORKER": "0",
    "GPUTRIAGE_PURE_PYTHON": "1",
}


def variables_in_source() -> set[str]:
    names = set()
    for path in SRC.rglob("*.py"):
        names |= set(re.findall(r"\bGPUTRIAGE_[A-Z_]+[A-Z]\b", path.read_text()))
    return names - NOT_VARIABLES


def test_every_variable_gputriage_reads_is_checked() -> None:
    assert variables_in_source() == set(VARIABLES)
    assert set(BAD_VALUES) == set(VARIABLES) == set(GOOD_VALUES)


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, values in BAD_VALUES.items() for v in values])
def test_a_bad_variable_is_one_line_and_exit_2(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    assert main(["env", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"gputriage: error: {name}={value!r}") and "expected" in line


def test_good_and_empty_values_pass() -> None:
    check_environment(GOOD_VALUES)
    check_environment(dict.fromkeys(VARIABLES, ""))  # empty is unset


def test_an_unknown_fake_scenario_outside_the_cli_is_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputriage.hardware.nvml import open_nvml

    monkeypatch.setenv(envnames.FAKE_NVML, "no_such_scenario")
    with pytest.raises(InputError, match="no such fake NVML scenario"), open_nvml():
        pass


def test_the_bad_variable_the_issue_saw_gives_no_traceback(tmp_path: Path) -> None:
    """Through the real entry point, as a user types it."""
    for argv in (["env"], ["watch", "--once"]):
        done = subprocess.run(
            [sys.executable, "-m", "gputriage", *argv],
            env={"PATH": "/usr/bin:/bin", "GPUTRIAGE_FAKE_NVML": "a100_typo"},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1


# -- flags -------------------------------------------------------------------------------------------------------------


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: sub.choices[name] for name in COMMANDS}


VALIDATING_TYPES = {
    "device_name",
    "positive_number",
    "out_folder",
    "out_file",
    "existing_path",
    "parse",
}  # parse: whole_number(n)
NUMERIC_OR_PATH = re.compile(r"steps|jobs|max|interval|pid|out|html|md|paths|target|from")


def test_every_numeric_or_path_flag_is_checked_by_a_type() -> None:
    """No flag takes a raw int, float or Path: each goes through a type that refuses a bad value in one line."""
    for command, parser in command_parsers().items():
        for action in parser._actions:
            kind = getattr(action.type, "__name__", None)
            if kind in ("int", "float", "Path"):
                pytest.fail(f"{command} {action.dest}: a raw {kind}, unchecked")
            if action.type is not None:
                assert kind in VALIDATING_TYPES, (command, action.dest, kind)


FLAG_CASES = [
    ("run", ["--steps", "0", "x.py"]),
    ("run", ["--steps", "-3", "x.py"]),
    ("run", ["--steps", "ten", "x.py"]),
    ("run", ["--trace-steps", "0", "x.py"]),
    ("run", ["--out", "{file}", "x.py"]),
    ("run", ["--out", "", "x.py"]),
    ("demo", ["--steps", "0"]),
    ("demo", ["--steps", "1.5"]),
    ("demo", ["--out", "{file}"]),
    ("trace", ["--jobs", "0", "{file}"]),
    ("trace", ["--max-gib", "nan", "{file}"]),
    ("trace", ["--max-gib", "-1", "{file}"]),
    ("trace", ["--max-events", "1e3", "{file}"]),
    ("trace", ["--max-gzip-ratio", "inf", "{file}"]),
    ("trace", ["{missing}"]),
    ("trace", ["{file}", "--out", "{file}"]),
    ("watch", ["--interval", "0"]),
    ("watch", ["--interval", "inf"]),
    ("watch", ["--interval", "soon"]),
    ("watch", ["--pid", "-1"]),
    ("watch", ["--pid", "abc"]),
    ("report", ["{missing}"]),
    ("report", ["{file}", "--html", "{dir}"]),
    ("report", ["{file}", "--md", "{dir}"]),
    ("report", ["{file}", "--out", "{file}"]),
    ("env", ["--out", "{file}"]),
    ("env", ["--from", "{missing}"]),
    ("env", ["--from", "{dir}"]),
    ("env", ["--expect-device", "GPU 0"]),
    ("run", ["--expect-device", "GPU 0", "{file}"]),
]


@pytest.mark.parametrize(("command", "args"), FLAG_CASES, ids=[f"{c} {' '.join(a)}" for c, a in FLAG_CASES])
def test_a_bad_flag_value_is_one_line_and_exit_2(
    command: str, args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUTRIAGE_FAKE_NVML", "busy_a100")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a_file").write_text("{}")
    (tmp_path / "a_dir").mkdir()
    places = {"{file}": "a_file", "{dir}": "a_dir", "{missing}": "not_there.json"}
    argv = [command, *(places.get(a, a) for a in args)]
    assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("gputriage: error: "), line
    assert not list(tmp_path.glob("gputriage-out*")), "nothing may run on a bad value"


def test_one_line_errors_name_the_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "demo", "--steps", "0"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "gputriage: error: argument --steps: must be at least 1, not 0 (see gputriage demo --help)\n"
    )
    assert done.stdout == ""


def test_value_types() -> None:
    assert common.whole_number(1)(" 3 ") == 3
    assert common.positive_number("0.25") == 0.25
    for bad in ("0", "-1", "nan", "inf", "x", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            common.positive_number(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        common.whole_number(1)("0")
