"""Options and steps shared by several commands, and the checks every flag value goes through.

A bad value is one line and exit 2, never a traceback: argparse's own errors are made one line by `OneLineParser`,
and each numeric or path flag is parsed by one of the types below, which say what they expected.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from gputriage.errors import InputError, Terminated
from gputriage.findings import Severity

if TYPE_CHECKING:  # `run` imports this module before the user's job starts: the report's modules come later
    from gputriage.diagnosis import Diagnosis
    from gputriage.report.output import OutputOptions


def require_torch() -> None:
    """`run` and `demo` run the job in the Python gputriage is installed in. torch is not a dependency (users bring
    their own build), so a Python without it gets one line that says where to put it, not an import traceback."""
    try:
        found = find_spec("torch") is not None
    except (ImportError, ValueError):  # a torch package that cannot even be located is as good as absent here
        found = False
    if not found:
        raise InputError(
            f"PyTorch is not installed in this Python ({sys.executable}), and gputriage runs the job in the Python it "
            "is installed in: install your PyTorch build there (https://pytorch.org/get-started/locally/), or "
            "install gputriage in the environment that has torch (`gputriage env` shows what this Python has)"
        )


class OneLineParser(argparse.ArgumentParser):
    """argparse, with its errors in the one line every gputriage error is (`gputriage: error: argument --steps: ...`)
    instead of the usage block: a CI log shows the reason, and `--help` is named for the rest."""

    def error(self, message: str) -> NoReturn:
        # the message quotes what was typed (a path with escape sequences in its name): shown, never interpreted
        from gputriage.report.sanitize import inline_text

        self.exit(2, f"gputriage: error: {inline_text(message)} (see {self.prog} --help)\n")


def add_output_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print the machine-readable report to stdout")
    parser.add_argument(
        "--out", type=out_folder, metavar="DIR", help="write report.json and the other report files here"
    )
    add_fail_on(parser)
    add_verbose(parser)


def add_verbose(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show the whole report: what was measured and every finding in full (by default the terminal gets "
        "the verdict, the ladder, the critical and warning findings, and one line per info finding)",
    )


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        choices=["critical", "warning"],
        help="exit 1 when a finding of this severity or worse exists (for CI)",
    )


def output_options(args: argparse.Namespace) -> OutputOptions:
    from gputriage.report.output import OutputOptions

    return OutputOptions(json=getattr(args, "json", False), out_dir=args.out, verbose=getattr(args, "verbose", False))


def exit_code_for(diag: Diagnosis, fail_on: str | None, stream: TextIO | None = None) -> int:
    """--fail-on: 1 when a finding at that severity or worse exists, said in one line on stderr (a CI log shows why
    the step failed, after the report)."""
    bar = Severity(fail_on) if fail_on is not None else None
    if bar is None or not diag.worst_at_least(bar):
        return 0
    failing = dict.fromkeys(f.code for f in diag.findings if f.severity.weight <= bar.weight)
    print(f"gputriage: --fail-on {fail_on}: {', '.join(failing)}; exit 1", file=stream or sys.stderr)
    return 1


# -- flag value types: each raises ArgumentTypeError, which argparse turns into one line and exit 2 ---------------


def whole_number(minimum: int) -> Callable[[str], int]:
    """An int of at least `minimum` ("--steps 0" and "--steps ten" are refused with what was expected)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def positive_number(text: str) -> float:
    """A finite number above 0 (seconds, GiB, a ratio): not 0, not negative, not nan or inf."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, not {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


# cuda, cuda:1, mps, meta, cpu, privateuseone: the spelling torch.device accepts (whether torch knows the type is
# checked when torch is imported, with its own one-line error)
DEVICE_NAME_RE = re.compile(r"^([a-z][a-z_0-9]*)(:\d+)?$")
# The device types torch.device() parses (c10's DeviceType), and the names vendor backends register for its
# PrivateUse1 slot (Ascend npu, Moore Threads musa, Cambricon mlu, Enflame gcu, ...). Checked without importing torch:
# `env` and `trace` never import it, and a typo ("gpu", "cdua") must not turn into a verdict judged for no device.
DEVICE_TYPES = frozenset(
    {
        "cpu", "cuda", "mps", "xpu", "meta", "hip", "hpu", "mtia", "maia", "xla", "lazy", "ipu", "ve", "fpga",
        "vulkan", "metal", "mkldnn", "opengl", "opencl", "ideep", "privateuseone",
        "npu", "musa", "mlu", "gcu", "sdaa", "dipu",
    }
)  # fmt: skip


def device_problem(text: str) -> str | None:
    """Why `text` is not a device as torch spells one ("cuda", "cuda:1", "mps", "cpu"); None when it is one."""
    match = DEVICE_NAME_RE.match(text)
    if match is not None and match.group(1) in DEVICE_TYPES:
        return None
    hint = "; torch calls NVIDIA and AMD GPUs cuda" if text.split(":", 1)[0].lower() in ("gpu", "nvidia", "amd") else ""
    return f"expected a device torch knows (cuda, cuda:1, mps, xpu, meta, cpu), not {text!r}{hint}"


def device_name(text: str) -> str:
    """A device spelled as torch spells one, checked before anything runs (--out is not created for a typo)."""
    problem = device_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def out_folder(text: str) -> Path:
    """A report folder: it may not exist yet, but it cannot be a file, and it must be writable: checked (and created)
    now, before a trace is read or a job runs, not after (`--out /proc/x` printed the whole report, then failed)."""
    from gputriage.errors import InputError
    from gputriage.outdir import check_out_dir

    path = _named(text, "a folder")
    found = _stat(path, text)
    if found is not None and not stat.S_ISDIR(found.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder")
    try:
        check_out_dir(path)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).replace(f"--out {path}: ", f"{text} ", 1)) from None
    return path


def out_file(text: str) -> Path:
    """A file to write: it may not exist yet (nor its folder), but it cannot be a folder."""
    path = _named(text, "a file name")
    found = _stat(path, text)
    if found is not None and stat.S_ISDIR(found.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    return path


def existing_path(text: str) -> Path:
    """A file or folder to read."""
    path = _named(text, "a path")
    if _stat(path, text) is None:
        if text == "-":  # as `env --from -` reads it; these commands read files
            raise argparse.ArgumentTypeError("- (standard input) is not read here: save it to a file and give its path")
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    return path


def _stat(path: Path, text: str) -> os.stat_result | None:
    """The path's status, following links; None where nothing is there. A name longer than the file system allows,
    a loop of symbolic links or a folder that cannot be searched is said as the system says it, not a traceback."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror or exc}") from None


def _named(text: str, what: str) -> Path:
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected {what}, not an empty name")
    return Path(text)


@contextlib.contextmanager
def signals_end_the_command() -> Iterator[None]:
    """SIGTERM and SIGHUP (`kill`, `timeout`, a closed terminal) raise Terminated while the command runs, so its
    temporary files are removed and its worker processes stopped; the CLI then dies of the same signal, as the
    command would have without this. Without it, the default action ended this process at once and left both."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread only
        yield
        return

    def raise_terminated(signum: int, _frame: object) -> None:
        raise Terminated(signal.Signals(signum).name)

    before = {signum: signal.signal(signum, raise_terminated) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
