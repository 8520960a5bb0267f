"""A signal that arrives while a command imports what it needs ends it as the signal would, with no traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import gputriage.commands.trace as trace_command
    from gputriage.cli import main

    def importing(args):
        # What an import does when it meets functools.cached_property or a dataclass field: Python 3.11 wraps any
        # exception raised in __set_name__ in a RuntimeError.
        class Descriptor:
            def __set_name__(self, owner, name):
                os.kill(os.getpid(), getattr(signal, sys.argv[2]))
                time.sleep(2)

        class Module:
            attribute = Descriptor()

        return 0

    trace_command._trace = importing
    sys.exit(main(["trace", sys.argv[1]]))
    """
)


@pytest.mark.parametrize(("name", "code"), [("SIGTERM", -signal.SIGTERM), ("SIGINT", 130)])
def test_a_signal_during_an_import_ends_the_command_cleanly(tmp_path: Path, name: str, code: int) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": []}')
    argv = [sys.executable, "-c", _SCRIPT, str(path), name]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == code
    assert "Traceback" not in done.stderr


_LOADING_CLI = textwrap.dedent(
    """
    import os, signal, sys, time
    import importlib.abc

    class Interrupted(importlib.abc.MetaPathFinder):
        # Ctrl-C while gputriage.cli loads (the first 30 ms of the console script), plain or wrapped by __set_name__
        def find_spec(self, name, path=None, target=None):
            if name == "gputriage.cli":
                if sys.argv[1] == "wrapped":
                    class Descriptor:
                        def __set_name__(self, owner, name):
                            os.kill(os.getpid(), signal.SIGINT)
                            time.sleep(2)

                    class Module:
                        attribute = Descriptor()
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(2)
            return None

    sys.meta_path.insert(0, Interrupted())
    from gputriage.launch import main
    main()
    """
)


@pytest.mark.parametrize("how", ["plain", "wrapped"])
def test_ctrl_c_while_the_command_loads_is_exit_130(how: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _LOADING_CLI, how], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 130, done.stderr
    assert "Traceback" not in done.stderr
