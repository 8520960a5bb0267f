"""Which files are the user's code: the answer every `where` and the stack sampler rest on."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from gputriage.collectors.usercode import is_own_file, is_user_file


def test_a_console_script_launcher_is_not_the_users_code(tmp_path: Path) -> None:
    """`gputriage run train.py` starts from the `gputriage` launcher in the environment's bin folder: its frame is at
    the bottom of every stack the sampler reads, and must never be counted as a line of the user's."""
    launcher = Path(sysconfig.get_paths()["scripts"]) / "gputriage"
    assert not is_user_file(str(launcher))
    assert not is_user_file(str(Path(sysconfig.get_paths()["scripts"]) / "torchrun"))
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    assert is_user_file(str(script))
    assert not is_own_file(str(script))
