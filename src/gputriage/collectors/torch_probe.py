"""What torch itself says about CUDA: its build, `is_available`, the devices, the arch list, and the init warnings.

This module is self-contained (standard library and torch only) on purpose: `env_probe` runs its source in a child
interpreter (`python -c`), so a broken torch, a crash in a CUDA library or a hanging CUDA initialisation cannot take
gputriage down. When torch is already imported (`gputriage run`, inside the user's process) the same `collect()` runs
in-process instead, without touching CUDA state beyond what `is_available()` does.
"""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from typing import Any

MARKER = "GPUTRIAGE_TORCH_PROBE "


def collect(*, init_cuda: bool) -> dict[str, Any]:
    """Probe torch; never raises. `init_cuda` also runs torch's lazy CUDA init (only safe in a child process).

    Returns the TorchFacts fields as a plain dict.
    """
    try:
        import torch
    except Exception as exc:  # ImportError, OSError from a missing libcudart, anything a broken install raises
        return {"installed": False, "import_error": f"{type(exc).__name__}: {exc}"}
    facts: dict[str, Any] = {
        "installed": True,
        "version": str(torch.__version__),
        "cuda_version": getattr(torch.version, "cuda", None),
        "hip_version": getattr(torch.version, "hip", None),
    }
    facts["is_cpu_build"] = facts["cuda_version"] is None and facts["hip_version"] is None
    messages: list[str] = []
    with _caught_warnings(fresh_process=init_cuda) as caught:
        facts.update(_cuda_facts(torch, init_cuda, messages))
    messages.extend(caught)
    facts["init_warning"] = "\n".join(m.strip() for m in messages if m.strip()) or None
    facts["other_accelerators"] = _other_accelerators(torch)
    with contextlib.suppress(Exception):  # torch before 1.12 has no MPS backend
        facts["mps_built"] = bool(torch.backends.mps.is_built())
    return facts


@contextlib.contextmanager
def _caught_warnings(*, fresh_process: bool) -> Iterator[list[str]]:
    """The warnings torch shows while it is asked, kept instead of shown.

    In the child interpreter, every one (filters set to "always"). Inside the job's process, the filters stay as they
    are: changing them (even inside `catch_warnings`) tells Python they changed, and every warning the job had shown
    once per place would show again; there only the display is borrowed.
    """
    caught: list[str] = []
    if fresh_process:
        with warnings.catch_warnings(record=True) as records:
            warnings.simplefilter("always")
            yield caught
        caught.extend(str(w.message) for w in records)
        return
    shown = warnings.showwarning

    def keep(message: Any, *args: Any, **kwargs: Any) -> None:
        caught.append(str(message))

    warnings.showwarning = keep
    try:
        yield caught
    finally:
        warnings.showwarning = shown


def _cuda_facts(torch: Any, init_cuda: bool, messages: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"arch_list": _compiled_arch_list(torch)}
    try:
        available = bool(torch.cuda.is_available())
        out["is_available"] = available
        out["device_count"] = int(torch.cuda.device_count()) if available else 0
        if available and init_cuda:
            # torch's own checks (_check_capability / _check_cubins) run here and warn about unsupported GPUs.
            torch.cuda.init()
    except Exception as exc:  # a CUDA error at init is a fact to report, not a crash
        messages.append(f"{type(exc).__name__}: {exc}")
        out.setdefault("is_available", False)
    return out


def _compiled_arch_list(torch: Any) -> list[str] | None:
    # get_arch_list() returns [] whenever no GPU is available; the compiled flags tell the build's archs regardless.
    flags = getattr(torch._C, "_cuda_getArchFlags", None)
    if flags is None:
        return None
    try:
        text = flags()
    except Exception:  # a CPU build has the function on some versions but raises
        return None
    return text.split() if text else None


def _other_accelerators(torch: Any) -> dict[str, bool]:
    found: dict[str, bool] = {}
    # Older torch lacks torch.backends.mps; a broken XPU runtime must not hide the CUDA facts.
    with contextlib.suppress(Exception):
        found["mps"] = bool(torch.backends.mps.is_available())
    with contextlib.suppress(Exception):
        if hasattr(torch, "xpu"):
            found["xpu"] = bool(torch.xpu.is_available())
    return found


if __name__ == "__main__":
    print(MARKER + json.dumps(collect(init_cuda="--init-cuda" in sys.argv)), flush=True)
