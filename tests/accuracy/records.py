"""Hand-built records for the accuracy tests: what a collector would have filled for a few real situations."""

from __future__ import annotations

from gputriage.record import Run
from gputriage.record.environment import DriverFacts, Environment, GpuDevice, TorchFacts
from gputriage.record.placement import ModelInfo, PlacementSection, TensorSeen
from gputriage.record.process import ProcessSection
from gputriage.record.steps import LoaderInfo, Step, StepsSection


def cpu_only_machine() -> Environment:
    return Environment(
        torch=TorchFacts(installed=True, version="2.13.0+cpu", is_cpu_build=True, is_available=False),
        driver=DriverFacts(nvml_loaded=False, nvml_error="NVML Shared Library Not Found"),
    )


def gpu_machine() -> Environment:
    return Environment(
        torch=TorchFacts(installed=True, version="2.4.1+cu121", cuda_version="12.1", is_available=True),
        driver=DriverFacts(
            nvml_loaded=True, driver_version="550.54.15", devices=[GpuDevice(index=0, name="NVIDIA A100")]
        ),
    )


ITEM_ON_META = "Tensor.item() cannot be called on meta tensors"


def crash(where: str = "train.py:237", message: str = ITEM_ON_META) -> ProcessSection:
    return ProcessSection(exit_code=1, exception_type="RuntimeError", exception_message=message, crash_where=where)


def steps(waits_s: list[float], compute_s: float = 0.05) -> StepsSection:
    """Steps that wait `waits_s[i]` for data and compute `compute_s`; the phases add up to the wall time."""
    out, t_s = [], 0.0
    for i, wait_s in enumerate(waits_s):
        out.append(Step(i, t_s, wait_s + compute_s, data_wait_s=wait_s, forward_s=compute_s))
        t_s += wait_s + compute_s
    loader = LoaderInfo(dataset_class="Images", batch_size=32, num_workers=1, where="train.py:20")
    return StepsSection(steps=out, loader=loader, steps_observed=len(out), cpu_count=2)


def meta_run(**sections: object) -> Run:
    run = Run(command="run", argv=["train.py"], expect_device="meta", environment=cpu_only_machine())
    for name, value in sections.items():
        setattr(run, name, value)
    return run


def model_on(device: str, name: str = "Net", where: str | None = "train.py:30") -> ModelInfo:
    return ModelInfo(name=name, parameter_count=1000, devices={device: 1000}, where=where)


def placement(model: ModelInfo, *tensors: TensorSeen) -> PlacementSection:
    return PlacementSection(models=[model], tensors=list(tensors), steps_watched=2)
