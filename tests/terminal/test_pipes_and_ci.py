"""Pipes, CI logs, NO_COLOR and TERM=dumb get plain text; a terminal gets colours and boxes. `watch` prints one line
per interval through a pipe, and whatever ends it (SIGINT, SIGTERM, SIGHUP) prints a summary of the session. Tested
through a real pipe, and in a real terminal with tmux (skipped where tmux is not installed)."""

from __future__ import annotations

import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_records import starved_run
from terminal_helpers import ANSI, BOX_CHARS

from gputriage.diagnosis import diagnose
from gputriage.report import terminal
from gputriage.report.output import make_console, plain_output

CLEAN_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")}
LINE = re.compile(r"^\d\d:\d\d:\d\d  GPU 0 util 0% mem 76\.6 GiB / 80\.0 GiB power 63 W → idle while python train\.py")


class Tty:
    """A real terminal (a pty) to write to, as a TextIO."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        self.stream = open(self.slave, "w", encoding="utf-8", closefd=False)  # noqa: SIM115

    def read(self) -> str:
        self.stream.flush()
        chunks = []
        os.set_blocking(self.master, False)
        try:
            while True:
                chunks.append(os.read(self.master, 65536))
        except BlockingIOError:
            pass
        return b"".join(chunks).decode("utf-8", "replace")

    def close(self) -> None:
        self.stream.close()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def tty() -> Iterator[Tty]:
    terminal_ = Tty()
    yield terminal_
    terminal_.close()


@pytest.mark.parametrize(
    ("environ", "plain"),
    [
        ({"TERM": "xterm-256color"}, False),
        ({"TERM": "xterm-256color", "CI": "true"}, True),
        ({"TERM": "xterm-256color", "CI": "false"}, False),
        ({"TERM": "xterm-256color", "NO_COLOR": "1"}, True),
        ({"TERM": "xterm-256color", "NO_COLOR": ""}, False),
        ({"TERM": "dumb"}, True),
    ],
)
def test_a_terminal_is_plain_only_when_asked(tty: Tty, environ: dict[str, str], plain: bool) -> None:
    assert plain_output(tty.stream, environ) is plain  # type: ignore[arg-type]


def test_a_pipe_or_a_file_is_always_plain(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as log:
        assert plain_output(log, {"TERM": "xterm-256color"})
    assert plain_output(io.StringIO(), {})


def test_the_report_on_a_terminal_and_in_a_pipe(tty: Tty, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    for name in ("CI", "NO_COLOR", "FORCE_COLOR", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    diag = diagnose(starved_run())
    terminal.render(diag, make_console(tty.stream, width=80))  # type: ignore[arg-type]
    shown = tty.read()
    assert "\x1b[" in shown and BOX_CHARS & set(ANSI.sub("", shown))
    piped = io.StringIO()
    terminal.render(diag, make_console(piped, width=80))
    assert "\x1b" not in piped.getvalue() and not BOX_CHARS & set(piped.getvalue())
    assert ANSI.sub("", shown).replace("\r", "").count("input-pipeline-bound") == piped.getvalue().count(
        "input-pipeline-bound"
    )


# -- watch through a pipe ------------------------------------------------------------------------------------------


def start_watch(*extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gputriage", "watch", "--interval", "0.2", *extra],
        env={**CLEAN_ENV, "GPUTRIAGE_FAKE_NVML": "idle_memory_held", "TERM": "xterm-256color"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_watch_in_a_pipe_prints_a_line_per_interval_and_a_summary_on_any_signal(signum: signal.Signals) -> None:
    proc = start_watch()
    assert proc.stdout is not None
    first = proc.stdout.readline()  # arrives while the watch runs, not at its end
    second = proc.stdout.readline()
    assert LINE.match(first) and LINE.match(second), (first, second)
    proc.send_signal(signum)
    rest, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    summary = rest.splitlines()[-2:]
    assert re.match(rf"gputriage watch: .*, \d+ readings, stopped by {signum.name}$", summary[0]), summary
    assert summary[1].startswith("GPU 0 NVIDIA A100-SXM4-80GB: mean util 0%, memory peak 76.6 GiB of 80.0 GiB → idle")
    assert "Traceback" not in err and "\x1b" not in rest


def test_a_reader_that_has_gone_ends_the_command_as_sigpipe_would(tmp_path: Path) -> None:
    # `| head -1` exited 1, the code of a --fail-on hit: rich's console raised SystemExit(1) on the broken pipe.
    sys.path.insert(0, str(Path(__file__).parent.parent / "trace"))  # the trace tests' builders
    from builders import training_loop

    trace = training_loop(loader_us=5000).write(tmp_path / "t.json")
    shell = f"{sys.executable} -m gputriage trace {trace} -v | true; echo rc=${{PIPESTATUS[0]}}"
    done = subprocess.run(
        ["bash", "-c", shell], env=CLEAN_ENV, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "rc=141", (done.stdout, done.stderr)
    assert done.stderr == ""  # no traceback, no "Exception ignored"


def test_a_console_inside_a_job_goes_quiet_on_a_broken_pipe() -> None:
    """run's in-process report, the API and the Lightning callback print inside the user's job: a broken pipe there
    must not end the job (rich's own handling raises SystemExit(1))."""
    from gputriage.report import output

    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError

        def flush(self) -> None:
            raise BrokenPipeError

    before = output.pipe_breaks()
    console = output.make_console(Gone())
    console.print("gputriage verdict: UNDERUSED")  # no SystemExit
    assert output.pipe_breaks() == before + 1 and console.quiet


def test_watch_into_head_ends_quietly() -> None:
    shell = f"{sys.executable} -m gputriage watch --interval 0.1 | head -2"
    done = subprocess.run(
        ["bash", "-c", shell],
        env={**CLEAN_ENV, "GPUTRIAGE_FAKE_NVML": "busy_a100"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert len(done.stdout.splitlines()) == 2
    assert "Traceback" not in done.stderr and "Broken pipe" not in done.stderr


# -- watch in a real terminal (tmux) -------------------------------------------------------------------------------

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """One detached tmux server of our own (its own socket), 80 columns wide."""

    def __init__(self, tmp_path: Path) -> None:
        self.socket = str(tmp_path / "tmux.sock")
        self.tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "40")
        self.tmux("set-option", "-t", "t", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=30, check=False
        )
        return done.stdout

    def run(self, command: str) -> int:
        self.tmux("respawn-pane", "-k", "-t", "t", f"exec {command}")
        return int(self.tmux("display", "-p", "-t", "t", "#{pane_pid}").strip())

    def screen(self, joined: bool = False) -> str:
        """What the terminal shows, from the top of its history; `joined`: lines the terminal folded, unfolded."""
        return self.tmux("capture-pane", "-p", "-S", "-", *(["-J"] if joined else []), "-t", "t")

    def wait_for(self, text: str, timeout_s: float = 90.0, after: str = "") -> str:
        """The screen once `text` shows (past `after`, when given): a line printed in two writes is waited for whole."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            screen = self.screen()
            if after in screen and text in screen[screen.index(after) + len(after) :]:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never showed{f' after {after!r}' if after else ''}:\n{self.screen()}")

    def wait_for_exit(self, timeout_s: float = 90.0) -> str:
        """The screen once the pane's command has ended, as tmux tells it (#{pane_dead}). Not read off tmux's "Pane is
        dead" line: that line waits for tmux to reap the process, and here it sometimes never came once the pytest
        process held OpenBLAS's threads (the pane dead, its exit status empty), failing the test after 90 s."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.tmux("display", "-p", "-t", "t", "#{pane_dead}").strip() == "1":
                return self.screen()
            time.sleep(0.2)
        raise AssertionError(f"the pane's command did not end in {timeout_s:.0f} s:\n{self.screen()}")

    def close(self) -> None:
        self.tmux("kill-server")


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    session = Tmux(tmp_path)
    yield session
    session.close()


# The pane stands for a person's terminal: the CI runner's own CI=true (tmux hands the server's environment to the
# pane) would rightly make gputriage plain, so the pane's command drops what asks for plain text.
TERMINAL_ENV = "env -u CI -u NO_COLOR -u FORCE_COLOR -u COLUMNS -u LINES TERM=xterm-256color"


def watch_command() -> str:
    return f"{TERMINAL_ENV} GPUTRIAGE_FAKE_NVML=idle_memory_held {sys.executable} -m gputriage watch --interval 0.3"


@needs_tmux
def test_watch_in_a_terminal_redraws_and_ctrl_c_prints_the_summary(tmux: Tmux) -> None:
    tmux.run(watch_command())
    screen = tmux.wait_for("╰")
    assert "╭─ GPU 0 · NVIDIA A100-SXM4-80GB" in screen
    assert screen.count("╭─ GPU 0") == 1  # redrawn in place, not scrolled
    time.sleep(1.0)
    assert tmux.screen().count("╭─ GPU 0") == 1
    tmux.tmux("send-keys", "-t", "t", "C-c")
    screen = tmux.wait_for("GPU 0 NVIDIA A100-SXM4-80GB: mean util 0%", after="stopped by SIGINT")
    assert all(len(line) <= 80 for line in screen.splitlines())


@needs_tmux
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_watch_in_a_terminal_ends_with_the_summary_on_a_signal(tmux: Tmux, signum: signal.Signals) -> None:
    pid = tmux.run(watch_command())
    tmux.wait_for("╰")
    os.kill(pid, signum)
    tmux.wait_for("idle while python train.py", after=f"stopped by {signum.name}")


@needs_tmux
def test_the_report_in_an_80_column_terminal(tmux: Tmux, tmp_path: Path) -> None:
    """`gputriage report -v` on a saved run, in a real 80-column terminal: boxes, and nothing past the edge."""
    from gputriage.report.output import write_files

    diag = diagnose(starved_run())
    write_files(diag, tmp_path / "out")
    tmux.run(f"{TERMINAL_ENV} {sys.executable} -m gputriage report -v {tmp_path / 'out'}")
    screen = tmux.wait_for_exit()
    assert "╭─ gputriage verdict: UNDERUSED" in screen
    assert all(len(line) <= 80 for line in screen.splitlines())
    assert "num_workers 0" in screen and "…" not in screen
    # the terminal folds a long fix line; unfolded, it is the fix's line, whole
    joined = [line.strip() for line in tmux.screen(joined=True).splitlines()]
    for finding in diag.findings:
        for fix_line in finding.fix.splitlines():
            assert fix_line.strip() in joined
