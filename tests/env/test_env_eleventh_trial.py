"""`gputriage env --from` on what an eleventh trial of fresh reports found misread. Each text is our own, in the shape
of what people paste."""

from __future__ import annotations

from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.env import diagnose_text

_CONDA_INFO_JETSON = (
    "I am trying to install pytorch on a jetson NX, torch.cuda.is_available() gives False\n"
    "     active environment : track\n"
    "         python version : 3.7.1.final.0\n"
    "       virtual packages : __cuda=10.2=0\n"
    "                          __linux=4.9.253=0\n"
    "                          __glibc=2.27=0\n"
    "                          __archspec=1=aarch64\n"
)


def test_a_jetsons_generation_names_the_python_its_wheels_need() -> None:
    """pytorch#67997: a Jetson on JetPack 4 (kernel 4.9, CUDA 10.2, shown only by conda info's virtual packages) in a
    Python 3.7 environment: NVIDIA's JetPack 4 wheels are cp36 only, so the fix's wheel would not install there."""
    env = parse_environment_text(_CONDA_INFO_JETSON)
    assert env.host.jetson and env.host.jetpack_major == 4
    assert env.driver.cuda_driver_version == "10.2"
    finding = diagnose_text(_CONDA_INFO_JETSON).findings[0]
    assert finding.code == "cpu-only-build"
    assert "built for Python 3.6 only, and this environment has Python 3.7" in finding.fix
    assert "python=3.6" in finding.fix


def test_a_jetson_python_that_matches_its_wheels_gets_no_note() -> None:
    text = _CONDA_INFO_JETSON.replace("3.7.1", "3.6.9")
    assert "built for Python" not in diagnose_text(text).findings[0].fix
    orin = text.replace("__linux=4.9.253", "__linux=5.15.136").replace("__cuda=10.2", "__cuda=12.6")
    assert parse_environment_text(orin).host.jetpack_major == 6
    assert "JetPack 6 are built for Python 3.10 only, and this environment has Python 3.6" in (
        diagnose_text(orin).findings[0].fix
    )


def test_a_conda_pin_of_the_same_numbers_is_no_tegra_kernel() -> None:
    """A conda export's "typing-extensions=4.9.0=py" is no kernel release."""
    text = _CONDA_INFO_JETSON.replace("__linux=4.9.253=0", "typing-extensions=4.9.0=pyha770c72_0")
    text = text.replace("__cuda=10.2=0", "")
    assert parse_environment_text(text).host.jetpack_major is None
