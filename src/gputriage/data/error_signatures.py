"""The error texts people meet when torch cannot use the GPU, and what each one means for rung 1.

Each signature is what the CUDA runtime / driver, NVML, nvidia-smi, the container runtime or torch itself prints, as it
appears in pasted reports, with the public thread it was seen in (most of them are in tests/data/envs). `finding` is
the rung-1 finding it points to; some signatures only point to a family ("no-device": who hid the devices decides,
"no-driver": a container, a board without a driver, or no GPU at all), which the rules resolve from the other facts.
`finding=None` marks errors that are NOT rung-1 causes: they prove torch reached the GPU, so they are named as "not
why the GPU is idle" rather than forced into a rung-1 code.

Matching is by lowercase substring (`fragments`, any of them), so that a message cut short, wrapped, or prefixed by a
logger still matches; nothing here is a regular expression.
"""

from __future__ import annotations

import re

import msgspec

from gputriage.data.cuda_tables import FABRIC_MANAGER_FIX

NO_DEVICE = "no-device"  # CUDA sees no device: CUDA_VISIBLE_DEVICES, a container, or no GPU at all
NO_DRIVER = "no-driver"  # the driver library is missing: a container without GPU access, a board without a driver


class ErrorSignature(msgspec.Struct, frozen=True):
    key: str  # stable id, shown in the environment record ("cuda-804")
    fragments: tuple[str, ...]  # lowercase substrings; any one identifies the error
    finding: str | None  # rung-1 finding code or family (NO_DEVICE, NO_DRIVER); None: not a rung-1 cause
    meaning: str
    fix: str
    source: str  # the public thread where this text was seen
    cuda_error: int | None = None  # the CUDA runtime/driver error number, when it has one


# The family of the Intel GPU's errors: torch without XPU, or the XPU build without a device (rules/env.py's intel_xpu)
INTEL_XPU = "intel-xpu"
_UPGRADE_DRIVER = "upgrade the NVIDIA driver (https://www.nvidia.com/Download/index.aspx), then: nvidia-smi"
_RELOAD_UVM = "sudo rmmod nvidia_uvm && sudo modprobe nvidia_uvm   # no process may use the GPU; otherwise: sudo reboot"

SIGNATURES: tuple[ErrorSignature, ...] = (
    # --- the driver is older than the CUDA the build (or the container) needs -------------------------------------
    ErrorSignature(
        "torch-driver-too-old",
        ("nvidia driver on your system is too old",),
        "driver-too-old",
        "torch's own check: the driver supports an older CUDA than the one this torch build was compiled with",
        _UPGRADE_DRIVER,
        "https://github.com/lllyasviel/Fooocus/issues/1313",
    ),
    ErrorSignature(
        "cuda-35",
        ("driver version is insufficient for cuda runtime version", "cudaerrorinsufficientdriver"),
        "driver-too-old",
        "the NVIDIA driver is older than the CUDA runtime that torch was built with",
        _UPGRADE_DRIVER,
        "https://github.com/microsoft/human-pose-estimation.pytorch/issues/23",
        35,
    ),
    ErrorSignature(
        "container-cuda-requirement",
        ("requirement error: unsatisfied condition: cuda>=", "unsupported cuda version: driver"),
        "driver-too-old",
        "the container image needs a newer CUDA than the host driver supports, so the container runtime refuses it",
        "upgrade the host's NVIDIA driver, or use an image built for the CUDA that nvidia-smi shows on the host",
        "https://github.com/lightgbm-org/LightGBM/pull/6539",
    ),
    # --- CUDA initialisation errors (cuda-init-failed) --------------------------------------------------------------
    ErrorSignature(
        "cuda-804",
        (
            "forward compatibility was attempted on non supported hw",
            "cuinit(0) returned 804",
            "cuda_error_compat_not_supported_on_device",
        ),
        "cuda-init-failed",
        "a newer CUDA user space (the cuda-compat libraries that a container image ships or the container runtime "
        "mounts) runs on an older driver, and this GPU (GeForce / consumer) does not support forward compatibility",
        "upgrade the host driver to one that supports the container's CUDA, or use an image built for the driver's "
        "CUDA (nvidia-smi); or remove /usr/local/cuda/compat from LD_LIBRARY_PATH",
        "https://github.com/NVIDIA/nvidia-docker/issues/1515",
        804,
    ),
    ErrorSignature(
        "cuda-803",
        ("unsupported display driver / cuda driver combination", "cuda_error_system_driver_mismatch"),
        "cuda-init-failed",
        "the CUDA forward-compatibility libraries (cuda-compat) loaded do not match the kernel driver",
        "remove /usr/local/cuda/compat from LD_LIBRARY_PATH, or install the cuda-compat package matching the driver",
        "https://github.com/NVIDIA-NeMo/labs-molt/pull/44",
        803,
    ),
    ErrorSignature(
        "cuda-802",
        ("system not yet initialized", "cudaerrorsystemnotready", "cuda_error_system_not_ready"),
        "cuda-init-failed",
        "on NVSwitch systems (HGX/DGX A100, H100, H200, B200) CUDA waits for the Fabric Manager, which is not running "
        "or does not match the driver version",
        FABRIC_MANAGER_FIX,
        "https://github.com/pytorch/pytorch/issues/35710",
        802,
    ),
    ErrorSignature(
        "cuda-999",
        ("cuda unknown error", "cuda error: unknown error", "cuda_error_unknown", "cudaerrorunknown", "error (999)"),
        "cuda-init-failed",
        "the driver's state is broken, most often after the machine was suspended and resumed",
        _RELOAD_UVM,
        "https://github.com/pytorch/pytorch/issues/49081",
        999,
    ),
    ErrorSignature(
        "cuda-fork",
        ("cannot re-initialize cuda in forked subprocess",),
        "cuda-init-failed",
        "CUDA was initialised in the parent process and then used in a fork()ed child (DataLoader workers, "
        "multiprocessing), where it cannot be initialised again",
        "import torch.multiprocessing as mp; mp.set_start_method('spawn', force=True)   # before creating workers",
        "https://github.com/ecsplendid/rembg-greenscreen/issues/11",
        3,
    ),
    ErrorSignature(
        "cuda-3",
        (
            "cuda driver initialization failed",
            "cuda driver library init failure: 3",
            "initialization error (3)",
            "cudaerrorinitializationerror",
            "cuda error: initialization error",
            "cu-init failed",
            "could not load uvm kernel module",
        ),
        "cuda-init-failed",
        "cuInit failed although a driver is there: the UVM module (/dev/nvidia-uvm) is missing or broken, the "
        "process cannot open the device nodes, or a driver bug; nvidia-smi can still work in this state",
        "ls -l /dev/nvidia-uvm; sudo dmesg | grep -i nvrm   # then: " + _RELOAD_UVM,
        "https://github.com/ollama/ollama/issues/11593",
        3,
    ),
    ErrorSignature(
        "cuda-46",
        (
            "all cuda-capable devices are busy or unavailable",
            "cudaerrordevicesunavailable",
            "cuda_error_device_unavailable",
        ),
        "cuda-init-failed",
        "the GPUs are in Exclusive-Process compute mode and another process already holds them",
        "nvidia-smi -q -d COMPUTE   # then stop the other process, or (admin) sudo nvidia-smi -c DEFAULT",
        "https://github.com/NVIDIA/DIGITS/issues/2005",
        46,
    ),
    ErrorSignature(
        "num-gpus-assert",
        ("device >= 0 && device < num_gpus",),
        "cuda-init-failed",
        "torch's count of GPUs disagrees with the devices CUDA can open: most often MIG mode is on (CUDA opens one MIG "
        "instance per process, the count is of whole GPUs), or the code asks for an index it does not have",
        "nvidia-smi -L   # MIG instances are listed under their GPU, each with its MIG-... UUID\n"
        "export CUDA_VISIBLE_DEVICES=MIG-<uuid>   # one MIG instance per process, set before Python starts\n"
        "# or turn MIG off for whole GPUs: sudo nvidia-smi -i 0 -mig 0 (no process on it), then reset it\n"
        "# without MIG: use a GPU index below the count nvidia-smi -L shows",
        "https://github.com/pytorch/pytorch/issues/131650",
    ),
    ErrorSignature(
        "cuda-101",
        (
            "invalid device ordinal",
            "cudaerrorinvaliddevice",
            "misconfigurationexception: you requested gpu",  # Lightning checks the indices before CUDA does
        ),
        "cuda-init-failed",
        "the code asks for a GPU index (cuda:1, --gpu_ids, set_device(local_rank)) that this process does not have",
        "nvidia-smi -L   # the GPUs there are; then use an index below that count (cuda:0 on a one-GPU machine)",
        "https://github.com/LuyaooChen/uninformed-students-pytorch/issues/3",
        101,
    ),
    ErrorSignature(
        "gpu-lost",
        ("gpu is lost", "has fallen off the bus"),
        "cuda-init-failed",
        "the GPU fell off the PCIe bus (Xid 79): power, cooling or the link failed",
        "sudo dmesg | grep -i xid   # then reboot; check power and cooling",
        "https://github.com/JosephKJ/OWOD/issues/81",
    ),
    # --- no device / no driver: the other facts decide the finding --------------------------------------------------
    ErrorSignature(
        "cuda-100",
        (
            "no cuda-capable device is detected",
            "no cuda gpus are available",
            "cudaerrornodevice",
            "cuda_error_no_device",
        ),
        NO_DEVICE,
        "CUDA sees no device in this process",
        "echo $CUDA_VISIBLE_DEVICES; nvidia-smi -L   # compare the two",
        "https://github.com/pytorch/examples/issues/115",
        100,
    ),
    ErrorSignature(
        "no-driver",
        ("found no nvidia driver on your system",),
        NO_DRIVER,
        "torch could not load the NVIDIA driver library (libcuda)",
        "nvidia-smi   # on the host; in a container: start it with --gpus all",
        "https://github.com/weaviate/weaviate/issues/1736",
    ),
    ErrorSignature(
        "libcuda-missing",
        ("libcuda.so.1: cannot open shared object file", "libcuda.so: cannot open shared object file"),
        NO_DRIVER,
        "the NVIDIA driver library is not installed, or not mounted into this container",
        "nvidia-smi   # on the host; in a container: start it with --gpus all (NVIDIA Container Toolkit)",
        "https://github.com/IBM/pytorch-large-model-support/issues/12",
    ),
    # --- the driver and NVML ----------------------------------------------------------------------------------------
    ErrorSignature(
        "nvml-mismatch",
        ("driver/library version mismatch", "nvrm: api mismatch"),
        "driver-library-mismatch",
        "the driver was upgraded but the old kernel module is still loaded, so NVML and CUDA refuse to start",
        "sudo reboot",
        "https://github.com/oddmario/NVIDIA-Ubuntu-Driver-Guide/issues/4",
    ),
    ErrorSignature(
        "nvml-unknown",
        ("failed to initialize nvml: unknown error",),
        "cuda-init-failed",
        "NVML cannot open the GPU's device files; inside a container this happens when the container lost its device "
        "access (a systemd daemon-reload rewrote its device cgroup)",
        "docker restart CONTAINER   # gets the devices back; for good: nvidia-ctk with the systemd cgroup driver "
        "(NVIDIA container toolkit docs: 'Failed to initialize NVML: Unknown Error')",
        "https://github.com/NVIDIA/nvidia-docker/issues/1671",
    ),
    ErrorSignature(
        "smi-no-driver",
        ("couldn't communicate with the nvidia driver", "couldn‘t communicate with the nvidia driver"),
        "driver-not-loaded",
        "nvidia-smi cannot reach the kernel driver: it is not loaded (not installed, built for another kernel, "
        "blocked by Secure Boot or by nouveau)",
        "sudo modprobe nvidia && nvidia-smi   # if that fails: reinstall the driver for the running kernel",
        "https://github.com/pytorch/pytorch/issues/67991",
    ),
    ErrorSignature(
        "module-missing",
        (
            "module nvidia not found",
            "nvrm: the nvidia probe routine was not called",
            "nvrm: no nvidia graphics adapter probed",
            "nvml error: driver not loaded",
            "nvidia kernel module not found",
            "falling back to nouveau",
            "could not insert 'nvidia",
            "key was rejected by service",
            "[drm] initialized nouveau",
            "nvidia: module verification failed",
            "nvidia kernel module is not loaded",
            "kernel module nvidia is not loaded",
        ),
        "driver-not-loaded",
        "the NVIDIA kernel module is not loaded (missing for this kernel, or another driver such as nouveau holds "
        "the GPU)",
        "sudo modprobe nvidia && nvidia-smi   # if that fails: reinstall the driver for the running kernel",
        "https://github.com/mattshma/bigdata/issues/133",
    ),
    # --- containers --------------------------------------------------------------------------------------------------
    ErrorSignature(
        "docker-no-gpu-runtime",
        ('could not select device driver "" with capabilities: [[gpu]]', 'could not select device driver "nvidia"'),
        "container-without-gpu",
        "docker was asked for a GPU but has no NVIDIA runtime: the NVIDIA Container Toolkit is not installed or not "
        "configured for this docker daemon",
        "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker   # after installing "
        "the NVIDIA Container Toolkit",
        "https://github.com/hiyouga/LlamaFactory/issues/5268",
    ),
    ErrorSignature(
        "ctk-no-driver-library",
        ("load library failed: libnvidia-ml.so",),
        "driver-not-loaded",
        "the NVIDIA Container Toolkit on the host cannot load the driver's NVML library: the host has no NVIDIA driver "
        "installed or loaded (or docker runs from a snap that cannot see it)",
        "nvidia-smi   # on the host: if it fails, install the NVIDIA driver there first; docker from a snap: use "
        "docker's own packages instead",
        "https://github.com/docker/for-win/issues/13835",
    ),
    ErrorSignature(
        "ctk-wsl-no-adapter",
        ("wsl environment detected but no adapters were found",),
        NO_DRIVER,
        "WSL gives a container the GPU only through the Windows NVIDIA driver, and it exposes none: the machine has "
        "no NVIDIA GPU, the distribution runs under WSL 1, or the Windows driver is missing",
        "nvidia-smi   # inside WSL 2; if it fails: install the Windows NVIDIA driver, then wsl --update && "
        "wsl --shutdown",
        "https://github.com/NVIDIA/nvidia-docker/issues/1786",
    ),
    ErrorSignature(
        "no-hip-gpu",
        ("no hip gpus are available",),
        NO_DEVICE,
        "a ROCm (AMD) build of torch finds no AMD GPU it can use: the GPU is not an AMD one ROCm supports, the "
        "user may not open it (the video and render groups), or the ROCm build was installed where a CUDA (or the "
        "CPU) build was meant",
        "rocminfo | grep -i gfx   # ROCm must list the GPU (gfxNNNN); nothing listed: ROCm's driver does not see it\n"
        "groups   # must include video and render: sudo usermod -aG video,render $USER, then log in again\n"
        'python -c "import torch; print(torch.__version__, torch.version.hip)"   # the ROCm the build needs\n'
        "# a consumer card ROCm does not list (gfx1031, gfx1032, ...): HSA_OVERRIDE_GFX_VERSION=10.3.0 python ...\n"
        "# an NVIDIA GPU: this is the ROCm build by mistake; install a CUDA build instead",
        "https://github.com/comfyanonymous/ComfyUI/issues/5138",
    ),
    ErrorSignature(
        "hip-no-binary",
        # "HIP error: invalid device function": a kernel launched with no code object for the gfx target
        (
            "hiperrornobinaryforgpu",
            "unable to find code object for all current devices",
            "hip error: invalid device function",
        ),
        "arch-not-supported",
        "the ROCm build of torch has no code objects (kernels) for this AMD GPU's gfx target",
        "rocminfo | grep -i gfx   # the GPU's target: gfx1031, gfx1100, ...\n"
        "# a consumer card the build does not list: run it as the nearest target the build has,\n"
        "export HSA_OVERRIDE_GFX_VERSION=10.3.0   # RDNA2 (gfx103x); RDNA3 (gfx110x): 11.0.0\n"
        '# or a ROCm build whose arch list has the target: python -c "import torch; print(torch.cuda.get_arch_list())"',
        "https://github.com/oobabooga/textgen/issues/5",
    ),
    # --- the build ----------------------------------------------------------------------------------------------------
    ErrorSignature(
        "not-compiled-with-cuda",
        ("torch not compiled with cuda enabled", "not compiled with cuda"),
        "cpu-only-build",
        "this torch is a CPU-only build",
        "install a CUDA build of torch (the uninstall comes first)",
        "https://github.com/X-PLUG/MobileAgent/issues/60",
    ),
    # --- Intel GPUs (PyTorch's XPU device): the rule builds the fix from the GPU the text names ---------------------
    ErrorSignature(
        "xpu-not-compiled",
        ("torch not compiled with xpu enabled", "pytorch is not linked with support for xpu devices"),
        INTEL_XPU,
        "this torch has no XPU (Intel GPU) support: a CPU or CUDA build",
        "python -m pip install torch --index-url https://download.pytorch.org/whl/xpu",
        "https://github.com/vladmandic/sdnext/issues/4357",
    ),
    ErrorSignature(
        "xpu-no-device",
        ("xpu device count is zero",),
        INTEL_XPU,
        "the XPU build finds no Intel GPU: Intel's GPU driver (compute runtime, Level Zero) is missing or too old for "
        "this kernel, or the user cannot open /dev/dri/renderD*",
        "clinfo -l   # the Arc must be listed; if not, install Intel's GPU driver for this distribution",
        "https://github.com/vladmandic/sdnext/issues/3201",
    ),
    ErrorSignature(
        "xpu-runtime-uninitialized",
        ("pi_error_uninitialized", "ze_result_error_uninitialized"),
        INTEL_XPU,
        "the XPU build's Intel GPU runtime (Level Zero, under oneAPI) could not start: the compute runtime is missing, "
        "or older than the oneAPI / extension build that torch was installed with",
        "clinfo -l   # the GPU must be listed; then update Intel's compute runtime and oneAPI to the versions the "
        "build names",
        "https://github.com/intel/intel-extension-for-pytorch/issues/708",
    ),
    ErrorSignature(
        "cuda-209",
        (
            "no kernel image is available for execution on the device",
            "cudaerrornokernelimagefordevice",
            "cuda_error_no_binary_for_gpu",
        ),
        "arch-not-supported",
        "the build (or a compiled extension) has no kernels for this GPU's architecture",
        'python -c "import torch; print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())"',
        "https://github.com/alievk/avatarify-python/issues/58",
        209,
    ),
    # --- errors that are NOT why the GPU is idle (they prove torch reached it) ----------------------------------------
    ErrorSignature(
        "cuda-oom",
        ("cuda out of memory", "outofmemoryerror", "cuda error: out of memory", "cudaerrormemoryallocation"),
        None,
        "the GPU ran out of memory: torch reached the GPU, so this is not why a GPU sits idle",
        "reduce the batch size, or free the memory other processes hold (nvidia-smi)",
        "https://github.com/phamquiluan/ResidualMaskingNetwork/issues/15",
        2,
    ),
    ErrorSignature(
        "cuda-device-assert",
        ("device-side assert triggered", "cudaerrorassert"),
        None,
        "a kernel's own check failed on the GPU (most often an index or a class label out of range): torch reached "
        "the GPU and ran kernels there, so this is not why a GPU sits idle",
        "CUDA_LAUNCH_BLOCKING=1 python train.py   # the traceback then names the op; or run once on the CPU, where the "
        "same check raises with the values (IndexError, 'Target N is out of bounds')",
        "https://github.com/dingjiansw101/AerialDetection/issues/34",
        710,
    ),
    # torch.compile's Triton backend builds a small C launcher against the driver library and CUDA's headers when it
    # first compiles for a CUDA device: the eager code ran there, so the toolchain around torch fails, not its reach
    ErrorSignature(
        "compile-no-libcuda",
        ("cannot find -lcuda", "cannot find -lcuda:", "libcuda.so cannot found"),
        None,
        "torch.compile's Triton backend cannot link against libcuda.so (no unversioned libcuda.so where the linker "
        "looks): torch reached the GPU, so this is not why a GPU sits idle; the compile toolchain fails",
        "ldconfig -p | grep libcuda   # where the driver library is (WSL: /usr/lib/wsl/lib)\n"
        "export TRITON_LIBCUDA_PATH=/usr/lib/x86_64-linux-gnu   # the folder of libcuda.so.1 (WSL: /usr/lib/wsl/lib)\n"
        "# or, with root: sudo ln -s libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so && sudo ldconfig",
        "https://github.com/pytorch/pytorch/issues/94585",
    ),
    ErrorSignature(
        "compile-no-cuda-header",
        ("cuda.h: no such file or directory",),
        None,
        "torch.compile (or a CUDA extension) cannot find CUDA's cuda.h header to build its launcher: torch reached the "
        "GPU, so this is not why a GPU sits idle; the compile toolchain lacks CUDA's development headers",
        "# conda: conda install -c conda-forge cuda-cudart-dev cuda-nvcc   (the CUDA of torch.version.cuda)\n"
        "# pip / system: the CUDA toolkit's headers, then: export CPATH=/usr/local/cuda/include:$CPATH",
        "https://github.com/conda-forge/pytorch-cpu-feedstock/issues/317",
    ),
)


_BY_FRAGMENT = {fragment: sig for sig in SIGNATURES for fragment in sig.fragments}
# One alternation of every fragment: one linear scan of a line finds them all.
_ANY = re.compile("|".join(re.escape(f) for f in sorted(_BY_FRAGMENT, key=len, reverse=True)))


def match_signatures(lowered_line: str) -> list[ErrorSignature]:
    """The signatures whose text appears in this (lowercased) line, in catalogue order."""
    found = {_BY_FRAGMENT[m.group(0)].key for m in _ANY.finditer(lowered_line)}
    return [s for s in SIGNATURES if s.key in found]


def signature(key: str) -> ErrorSignature | None:
    return next((s for s in SIGNATURES if s.key == key), None)


def signature_of_error(number: int) -> ErrorSignature | None:
    """The signature of a CUDA error named by its number alone ("CUDA Error 802 on H200"), where one has it."""
    return next((s for s in SIGNATURES if s.cuda_error == number), None)
