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


def test_the_crash_is_the_error_a_librarys_cleanup_was_handling() -> None:
    """Lightning's teardown (`module.cpu()`) can fail while it handles the training step's error: the job's last
    exception is then the teardown's, and the device mismatch it was handling is what the job died of. A chain the
    user's own code makes, or any `raise ... from ...`, is kept as raised."""
    import json

    from gputriage.collectors.session import crash_origin

    try:
        try:
            raise RuntimeError("Expected all tensors to be on the same device, but found at least two devices")
        except RuntimeError:
            json.loads("{")  # a library's code fails while handling it
    except ValueError as final:
        origin = crash_origin(final)
        assert isinstance(origin, RuntimeError) and "same device" in str(origin)
    try:
        try:
            raise KeyError("lr")
        except KeyError:
            raise ValueError("the config has no lr") from None  # the user's own message, context suppressed
    except ValueError as final:
        assert crash_origin(final) is final
    try:
        try:
            raise KeyError("lr")
        except KeyError:
            raise ValueError("the config has no lr")  # noqa: B904  # the user's own line raised it
    except ValueError as final:
        assert crash_origin(final) is final
    assert crash_origin(None) is None
