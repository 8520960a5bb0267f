"""`distinct` is np.unique for integer columns, and a `trace` command never imports numpy.ma (its start-up cost)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from builders import training_loop

from gputriage.tracing.distinct import distinct


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint64])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 1000])
def test_distinct_is_np_unique(dtype: type, size: int) -> None:
    rng = np.random.default_rng(size)
    info = np.iinfo(dtype)
    for high in (3, int(info.max)):  # many repeats, and almost none
        values = rng.integers(max(int(info.min), -high), high, size, dtype=dtype, endpoint=True)
        got = distinct(values)
        assert got.dtype == values.dtype
        np.testing.assert_array_equal(got, np.unique(values))


def test_distinct_leaves_its_input_alone() -> None:
    values = np.array([3, 1, 3, 2], dtype=np.int64)
    distinct(values)
    assert values.tolist() == [3, 1, 3, 2]


def test_a_trace_command_does_not_import_numpy_ma(tmp_path: Path) -> None:
    trace = training_loop(steps=30, cpu_op_us=3000, kernel_us=50).write(tmp_path / "rank-0.json")
    argv = ["gputriage", "trace", str(trace), "--json", "--jobs", "1", "--out", str(tmp_path / "o")]
    script = (
        "import sys\n"
        "from gputriage.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "code = main()\n"
        "print(code, 'numpy.ma' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stderr.split()[-2:] == ["0", "False"], done.stderr[-2000:]
