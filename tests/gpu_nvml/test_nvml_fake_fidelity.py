"""The fake must be the binding: same function names, argument order, struct fields and constants as nvidia-ml-py.

These checks read the installed `pynvml` module (no GPU needed). The `gpu`-marked tests at the end run the same
sampler reads against the real library on a machine with an NVIDIA GPU.
"""

from __future__ import annotations

import inspect
import json

import pynvml
import pytest

from gputriage.cli import main
from gputriage.hardware import fake, readers
from gputriage.hardware.fake import FakeNvml
from gputriage.hardware.nvml import open_nvml
from gputriage.hardware.sampler import GpuSampler

FAKE_NVML_FUNCTIONS = sorted(n for n in dir(FakeNvml) if n.startswith("nvml"))


@pytest.mark.parametrize("name", FAKE_NVML_FUNCTIONS)
def test_every_fake_function_exists_in_the_binding_with_the_same_arguments(name: str) -> None:
    real = getattr(pynvml, name, None)
    assert real is not None, f"{name} is not in nvidia-ml-py"
    real_params = [p for p in inspect.signature(real).parameters.values() if p.default is inspect.Parameter.empty]
    fake_params = [p for p in inspect.signature(getattr(FakeNvml, name)).parameters.values() if p.name != "self"]
    fake_required = [p for p in fake_params if p.default is inspect.Parameter.empty]
    assert len(fake_required) == len(real_params), (name, real_params, fake_required)


def test_fake_constants_equal_the_binding() -> None:
    for name, value in vars(fake).items():
        if name.startswith("NVML_") and isinstance(value, int) and hasattr(pynvml, name):
            assert getattr(pynvml, name) == value, name


def test_reader_constants_equal_the_binding() -> None:
    assert readers.TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert readers.CLOCK_SM == pynvml.NVML_CLOCK_SM
    assert readers.CLOCK_MEM == pynvml.NVML_CLOCK_MEM
    assert readers.PCIE_TX_BYTES == pynvml.NVML_PCIE_UTIL_TX_BYTES
    assert readers.PCIE_RX_BYTES == pynvml.NVML_PCIE_UTIL_RX_BYTES
    assert readers.GPU_UTILIZATION_SAMPLES == pynvml.NVML_GPU_UTILIZATION_SAMPLES
    assert readers.GPM_METRICS_GET_VERSION == pynvml.NVML_GPM_METRICS_GET_VERSION
    assert readers.NVML_ERROR_GPU_IS_LOST == pynvml.NVML_ERROR_GPU_IS_LOST
    assert readers.NVML_ERROR_NOT_FOUND == pynvml.NVML_ERROR_NOT_FOUND
    assert readers.NVML_ERROR_FUNCTION_NOT_FOUND == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    gpm_ids = {
        pynvml.NVML_GPM_METRIC_SM_UTIL: "sm_active_pct",
        pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: "sm_occupancy_pct",
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: "tensor_active_pct",
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: "dram_active_pct",
    }
    assert gpm_ids == readers.GPM_METRICS
    reasons = {
        pynvml.nvmlClocksEventReasonSwPowerCap: "power_cap",
        pynvml.nvmlClocksEventReasonHwSlowdown: "hw_slowdown",
        pynvml.nvmlClocksEventReasonSwThermalSlowdown: "sw_thermal",
        pynvml.nvmlClocksEventReasonHwThermalSlowdown: "hw_thermal",
        pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown: "hw_power_brake",
    }
    for bit, name in reasons.items():
        assert readers.REASON_BITS[bit] == name
    assert pynvml.nvmlClocksEventReasonGpuIdle == readers.REASON_GPU_IDLE_BIT


def _fields(struct: type) -> set[str]:
    return {name for name, *_ in struct._fields_}  # type: ignore[attr-defined]


def test_result_objects_use_the_binding_field_names() -> None:
    # The fake's SimpleNamespaces carry exactly the attributes the sampler reads off the real structs.
    assert {"gpu", "memory"} <= _fields(pynvml.c_nvmlUtilization_t)
    assert {"total", "used", "free"} <= _fields(pynvml.c_nvmlMemory_t)
    assert {"pid", "usedGpuMemory"} <= _fields(pynvml.c_nvmlProcessInfo_v3_t)
    assert {"timeStamp", "sampleValue"} <= _fields(pynvml.c_nvmlSample_t)
    assert "uiVal" in _fields(pynvml.c_nvmlValue_t)
    assert {"pid", "timeStamp", "smUtil"} <= _fields(pynvml.c_nvmlProcessUtilizationSample_t)
    assert {"version", "numMetrics", "sample1", "sample2", "metrics"} == _fields(pynvml.c_nvmlGpmMetricsGet_t)
    assert {"metricId", "nvmlReturn", "value"} <= _fields(pynvml.c_nvmlGpmMetric_t)
    assert "isSupportedDevice" in _fields(pynvml.c_nvmlGpmSupport_t)
    request = fake.FakeGpmMetricsGet()
    assert len(request.metrics) == pynvml.NVML_GPM_METRIC_MAX


def test_fake_errors_read_like_the_binding() -> None:
    for code in (pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND):
        assert str(fake.NVMLError(code)) == str(pynvml.NVMLError(code))


# --- the real library (skipped without an NVIDIA GPU) ---------------------------------------------------------------
@pytest.mark.gpu
def test_real_nvml_every_metric_is_a_value_or_a_reason() -> None:
    with open_nvml() as session:
        assert session.ok, session.init_error
        sampler = GpuSampler(session, only_visible=False, history_s=5.0)
        sampler.tick(force_slow=True)
        sampler.stop()
        section = sampler.section()
    assert section.available and section.devices
    for track in section.devices:
        assert track.name and track.uuid and track.memory_total_bytes
        last = track.samples[-1]
        for metric in ("memory_used_bytes", "power_w", "sm_clock_mhz", "temperature_c"):
            assert getattr(last, metric) is not None or metric in track.unavailable
        assert last.gpu_util_pct is not None or "gpu_util_pct" in track.unavailable
        assert last.throttle_reasons is not None or "throttle_reasons" in track.unavailable


@pytest.mark.gpu
def test_real_watch_once_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--once", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gpu"]["source"] == "nvml"
    assert all(d["verdict"] for d in doc["gpu"]["devices"])
