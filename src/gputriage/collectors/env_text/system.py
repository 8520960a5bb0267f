"""The machine around torch: lspci, dmesg NVRM lines, /proc/driver/nvidia/version, lsmod / modprobe, nvcc -V, the
OS and Python banner, WSL, hosted runtimes (Colab), containers, and what the reporter says about the hardware.
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import first
from gputriage.collectors.env_text.limits import MAX_ITEMS, cap, version
from gputriage.collectors.env_text.lines import Paste
from gputriage.record.environment import Environment, HostFacts

_LSPCI = re.compile(
    r"(?:VGA compatible controller|3D controller|Display controller): NVIDIA Corporation", re.IGNORECASE
)
_OTHER_GPU = re.compile(
    r"(?:VGA compatible controller|3D controller|Display controller|graphics?)[ \t:]{1,4}"
    r"((?:Mesa |AMD |Advanced Micro Devices|Intel|Apple|Radeon)[^,;|]{0,60})",
    re.IGNORECASE,
)
# A non-NVIDIA GPU named in prose or a system summary ("My PC is Intel(R) Iris Xe Graphics", "i have Intel HD
# graphics 4000", "GPU: AMD Radeon RX 6700"): on a machine that shows nothing NVIDIA, the only graphics there are.
_INTEL_IGPU_SAID = re.compile(
    r"\bintel[ \t]+(?:cpu|processor|chip)\b[^.;!?]{0,30}?\bintegrated[ \t]+(?:gpu|graphics)", re.IGNORECASE
)
_OTHER_GPU_NAME = re.compile(
    r"\b((?:Intel(?:\(R\)|®)?[ \t]*(?:R[ \t]+)?(?:U?HD|Iris|lris|Arc)\b[\w \t()®]{0,24}?Graphics(?:[ \t]+\d{3,4})?)"
    r"|(?:AMD[ \t]+)?Radeon(?:\(TM\)|™)?[ \t]+(?:RX[ \t]+)?(?:Pro[ \t]+)?[0-9]{3,4}[A-Z]{0,2}(?:[ \t]+XT)?"
    r"|AMD[ \t]+(?:gpu|graphics card|graphics|video card)|\bRX[ \t]?[4-9][0-9]{2,3}(?:[ \t]?XT)?"
    r"|\bAMD[ \t]?[4-9][0-9]{3}[ \t]?XTX?"  # "AMD6500XT", "AMD 7900 XTX"
    r"|\bIntel[ \t]+(?:integrated[ \t]+)?(?:gpu|igpu)"  # "working with an Intel GPU"
    # Intel's discrete Arc cards, with or without "Intel" ("GPU : Intel Arc A750 8GB", "I have an arc770", the
    # workstation "Arc Pro B70" and "Arc Pro A60")
    r"|\b(?:Intel(?:\(R\)|®)?[ \t]*)?Arc(?:\(TM\)|™)?[ \t]?(?:Pro[ \t]?)?(?:[AB][3-7][0-9]{1,2}M?|[3-7][0-9]0M?)"
    r"|\bgfx[0-9]{3,4}[a-z]?)\b",  # an AMD GPU's ISA name, as ROCm and its users print it
    re.IGNORECASE,
)
_NVRM_VERSION = re.compile(
    r"NVRM version: NVIDIA UNIX[\w ]{0,40}Kernel Module[ \t]+([0-9]{2,4}\.[0-9]{1,4}(?:\.[0-9]{1,4})?)"
)
# dmesg when the user-space driver and the loaded kernel module differ: both versions, for driver-library-mismatch.
_API_MISMATCH = re.compile(
    r"API mismatch: the client has the version ([0-9]{2,4}\.[0-9]{1,4}(?:\.[0-9]{1,4})?), but[\W\d]{1,40}?"
    r"(?:NVRM:[ \t]*)?"
    r"this kernel module has the version ([0-9]{2,4}\.[0-9]{1,4}(?:\.[0-9]{1,4})?)",
    re.IGNORECASE,
)
# The user-space driver's package and version: apt's "nvidia-driver-525 525.85.12-0ubuntu1", and dpkg -l's rows of the
# packages that hold the user-space driver ("ii  nvidia-smi  525.85.12-1  amd64", Debian's nvidia-smi and libcuda1)
_DRIVER_PACKAGE = re.compile(
    r"\bnvidia-driver-[0-9]{3}(?::\w+)?[ \t]+([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)|"
    r"^ii[ \t]+(?:nvidia-smi|nvidia-utils(?:-[0-9]{3})?|libnvidia-compute(?:-[0-9]{3})?|libcuda1|"
    r"nvidia-driver(?:-bin)?)"
    r"(?::\w+)?[ \t]+(?:[0-9]{1,2}:)?([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)"
)
# The same machine works for another user or as root, not for the reporter's user
_OTHER_USER_WORKS = re.compile(
    r"\b(?:works?|returns? true|successfully)\b[^\n]{0,60}\b(?:but|while|whereas)\b[^\n]{0,40}"
    r"\b(?:doesn'?t|does not|fails|returns? false)\b|"
    r"\bworks?\b[^.\n]{0,30}\b(?:as root|with sudo)\b[^.\n]{0,40}\b(?:but|not)\b",
    re.IGNORECASE,
)
# A reboot tried, the problem still there
_REBOOTED = re.compile(
    r"\btried (?:to )?(?:a )?reboot|\beven after (?:a |the |several )?reboot|"
    r"\breboot(?:ing|ed)?(?: the (?:system|machine|server|computer))? (?:did not|didn't|does not|doesn't|won't|wont) "
    r"(?:help|work|fix|solve)|\bstill\b[^.\n]{0,40}\bafter (?:a |the )?reboot|"
    r"\brebooted\b[^.\n]{0,40}\b(?:still|same)\b",
    re.IGNORECASE,
)
_NVCC = re.compile(r"Cuda compilation tools, release ([0-9]{1,2}\.[0-9])")
# A set-up list's Python: "* **Python Version:** 3.10 (venv)", "- Python: 3.9.7", "python (version 3.8.10)"
_PYTHON_STATED = re.compile(
    r"^[ \t]*(?:[-*•+]{1,2}[ \t]*|[0-9]{1,2}\.[ \t]+)?(?:\*\*)?python(?:[ \t]+version)?(?:\*\*)?[ \t]*"
    r"(?::|=|\(version)?(?:\*\*)?"
    r"[ \t]*v?(3\.[0-9]{1,2}(?:\.[0-9]{1,2})?)\b(?!\.)",  # "python 3.8> import torch": a prompt naming it
    re.IGNORECASE,
)
# ... or said in a sentence: "because I use python 3.7", "running Python 3.10", "on python 3.9"
_PYTHON_IN_USE = re.compile(
    r"\b(?:i[ \t]+(?:use|have|run)|using|running|with|on)[ \t]+python[ \t]*v?"
    r"(3\.[0-9]{1,2}(?:\.[0-9]{1,2})?)\b(?!\.)",
    re.IGNORECASE,
)
# An install spec written with pluses, common in READMEs and their issues: "pytorch1.3.0+Python 3.6+CUDA10.1",
# "torch 1.7 + cuda 10.2": the torch release, and the Python and CUDA it was installed for.
_SPEC_TORCH = re.compile(
    r"(?<![A-Za-z0-9])(?:py)?torch[ \t]?v?([0-9]\.[0-9]{1,2}(?:\.[0-9]{1,2})?)[ \t]*\+[ \t]*(?=python|cuda)",
    re.IGNORECASE,
)
_SPEC_PART = re.compile(r"\+[ \t]*(python|cuda)[ \t]?v?([0-9]{1,2}\.[0-9]{1,2})", re.IGNORECASE)
_BANNER = re.compile(r"^Python ([0-9]\.[0-9]{1,2}\.[0-9]{1,2})\b")
_PLATFORM = re.compile(r"\bon (linux|win32|darwin)\b")
# "driver 531.79", and "the latest NVIDIA standard driver](https://...), which is version `472.84`" (a link between)
_PROSE_DRIVER = re.compile(
    r"driver[^0-9\n]{0,40}?\b([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\b|"
    r"driver\b[^\n]{0,160}?\bversion[ \t]*(?:is[ \t]*)?[`'\"]?([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\b",
    re.IGNORECASE,
)
_DOCKER_HOST = re.compile(r"^root@[0-9a-f]{12}:", re.IGNORECASE)
_NO_GPU = re.compile(
    r"\b(?:i (?:do not|don't|dont|do n't) have (?:a |an |any )?(?:nvidia |cuda[- ]capable |dedicated )?gpu|"
    r"(?:machine|computer|laptop|server|pc) (?:without|with no) (?:a |an )?(?:nvidia )?gpu|"
    r"no (?:nvidia )?gpu (?:on|in) (?:this|my|the) (?:machine|computer|laptop|server|pc)|"
    r"since i (?:do not|don't) have (?:a |an )?gpu|"
    r"(?:i am|i'm|im) not using (?:a |an |any )?nvidia(?: gpu| graphics| card)?|"
    r"i (?:do not|don't|dont) have (?:a |an |any )?nvidia(?: gpu| graphics| card)?|"
    r"(?:due to|because of|because there is|there is|there's) no nvidia (?:gpu|graphics card|card))\b",
    re.IGNORECASE,
)
# WSL mounts the Windows drives at /mnt/<letter>; a path into a Windows user's folder there is WSL's.
_WSL_DRIVE_PATH = re.compile(r"(?<![\w.-])/mnt/[a-z]/(?:Users|Program Files|Windows)/", re.IGNORECASE)
_WSL = re.compile(r"\bwsl ?2?\b|microsoft-standard|/usr/lib/wsl/|windows subsystem for linux", re.IGNORECASE)
_WSL2_KERNEL = re.compile(r"\b([0-9]{1,2}\.[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)-microsoft-standard", re.IGNORECASE)
# "Microsoft Windows [Version 10.0.19042.1052]" (ver), "OS: Microsoft Windows 10 Pro (10.0.19042 64-bit)" (collect_env)
_WINDOWS_BUILD = re.compile(r"\bwindows\b[^\n]{0,40}?\b10\.0\.([0-9]{5})\b", re.IGNORECASE)
_KERNEL_STATED = re.compile(
    r"\bkernel(?:[ \t]+version)?[ \t]*[:=]?[ \t]*v?([0-9]\.[0-9]{1,3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\b", re.I
)
_WSL1_KERNEL = re.compile(r"\b4\.4\.0-[0-9]{4,5}-microsoft\b", re.IGNORECASE)
# A virtual machine's own display adapter (lspci, lshw, dmesg): its guest has no GPU unless one is passed through.
_VM_DISPLAY = (
    ("hyperv_drm", "Hyper-V"),
    ("hyperv_fb", "Hyper-V"),
    ("hyper-v synthetic video", "Hyper-V"),
    ("vmware svga", "VMware"),
    ("virtualbox graphics adapter", "VirtualBox"),
    ("vboxvideo", "VirtualBox"),
    ("qxl paravirtual", "QEMU/KVM"),
    ("virtio gpu", "QEMU/KVM"),
    ("bochs-drm", "QEMU/KVM"),
)
_COLAB = re.compile(
    r"colab\.research\.google\.com|google colab|\bcolab\b|/content/(?:drive|sample_data|gdrive)", re.IGNORECASE
)
_CONTAINER_WORDS = re.compile(
    r"\b(?:inside (?:the |a |my )?(?:docker|container)|in (?:a |the )?(?:docker|container)|docker image|"
    r"docker container|container image|docker-compose|docker compose|kubernetes|\bpod\b)|--gpus\b",
    re.IGNORECASE,
)


_CONTAINER_HINTS = ("docker", "container", "kube", "pod", "--gpus")
# An NVIDIA Jetson (Tegra SoC): its GPU is integrated, there is no nvidia-smi, CUDA comes with JetPack / L4T.
_JETSON = re.compile(
    r"\b(jetson(?:[ \t]+(?:agx|orin|xavier|nano|tx[12]|nx|thor|super|developer kit)){0,3}|"
    r"l4t(?:[ \t]+r?[0-9]{2}\.[0-9](?:\.[0-9])?)?|jetpack|tegra|nv_tegra_release|"
    r"(?:agx|jetson)[ \t_-]?(?:orin|xavier)|orin[ \t_-]?(?:nano|nx|agx)|xavier[ \t_-]?nx)\b",
    re.IGNORECASE,
)
_JETSON_WORDS = ("jetson", "l4t", "jetpack", "tegra", "orin", "xavier")
_JETPACK = re.compile(r"jetpack[ \t]*(?:version)?[ \t:=(]*v?([4-9]\.[0-9](?:\.[0-9])?)\b", re.IGNORECASE)
# The L4T release a Jetson runs (a container tag "r36.4.tegra-aarch64", "L4T R35.4.1", /etc/nv_tegra_release's
# "# R36 (release), REVISION: 4.0"), and the JetPack it ships in (NVIDIA's JetPack archive; R36.4 is 6.1 and 6.2, one
# CUDA 12.6, one set of wheels)
_L4T = re.compile(
    r"\b(?:l4t[ \t-]*)?r(3[2-6])(?:\.([0-9])(?:\.[0-9])?(?=[ \t.-]|\b)|[ \t]*\(release\),[ \t]*revision:[ \t]*([0-9]))",
    re.IGNORECASE,
)
# The JetPack generation of an L4T major, of a Jetson's kernel release (conda's "__linux=4.9.253", uname's
# "4.9.253-tegra"), and of the CUDA that generation ships (JetPack 4: 10.0-10.2, 5: 11.4, 6: 12.2-12.6).
_JETPACK_OF_L4T_MAJOR = {"32": 4, "34": 5, "35": 5, "36": 6}
_TEGRA_KERNEL = re.compile(r"__linux=(4\.9|5\.10|5\.15)\.|\b(4\.9|5\.10|5\.15)\.[0-9]+-tegra\b", re.IGNORECASE)
# conda's virtual package for the driver: "__cuda=12.2=0" is the CUDA version the installed driver supports
_CONDA_CUDA = re.compile(r"\b__cuda=([0-9]{1,2}\.[0-9]{1,2})\b")
_JETPACK_OF_KERNEL = {"4.9": 4, "5.10": 5, "5.15": 6}
_JETPACK_OF_L4T = {
    ("32", "4"): "4.4", ("32", "5"): "4.5", ("32", "6"): "4.6", ("32", "7"): "4.6",
    ("35", "1"): "5.0", ("35", "2"): "5.1", ("35", "3"): "5.1.1", ("35", "4"): "5.1.2", ("35", "5"): "5.1",
    ("36", "2"): "6.0", ("36", "3"): "6.0", ("36", "4"): "6.1",
}  # fmt: skip
# A GPU the reporter names in a set-up list or prose, without nvidia-smi ("--GTX 1080Ti 11.0GB", "GPU: RTX 3090").
_GPU_WORDS = (
    "gtx", "rtx", "tesla", "quadro", "titan", "geforce", "100", "200", "a10", "a30", "a40", "l40", "k80", "t4", "l4"
)  # fmt: skip
_GPU_NAMED = re.compile(
    r"\b((?:nvidia[ \t]+)?(?:geforce[ \t]+)?(?:gtx|rtx)[ \t]?[0-9]{3,4}(?:[ \t]?(?:ti|super)\b|m\b)?|"
    # the other GeForce lines and the bare numbers after "GeForce" ("GeForce GT 740M", "GeForce MX150", "GeForce
    # 2080Ti")
    r"(?:nvidia[ \t]+)?geforce[ \t]+(?:gt|gts|mx)?[ \t]?[0-9]{3,4}(?:[ \t]?(?:ti|super)\b|m\b)?|"
    r"(?:nvidia[ \t]+)?(?:tesla|quadro)[ \t]+[a-z]{0,3}[0-9]{2,4}[a-z]{0,2}|titan[ \t]+(?:x|xp|v|rtx)\b|"
    # data-centre and workstation boards named bare ("an A100 machine", "8x H100 80GB", "RTX A6000"); the short
    # ones (T4, L4, A2) only after "nvidia" or before "gpu", where they cannot be something else
    r"(?:nvidia[ \t]+)?(?:rtx[ \t]?)?(?:[abhv]100|h200|b200|gb200|gh200|a10g|a30|a40|l40s?|p100|v100s?|k80|"
    r"a[4-6]000|a[4-6]500)\b|(?:nvidia|gpu)[ \t]+(?:t4|l4|a2|a10|p4|p40)\b|\b(?:t4|l4|a10)(?=[ \t]+gpu))",
    re.IGNORECASE,
)
# Facts that show a container (the user's own machine printed or ran them), and the runtime when it is not docker.
_CONTAINER_FACT = re.compile(
    r"/\.dockerenv|/run/\.containerenv|"
    r"the nvidia driver was not detected\. gpu functionality will not be available|"
    r"use the nvidia container toolkit to start this container|"
    r"\b(?:srun|salloc)\b.{0,200}--container-image|\benroot[ \t]+(?:start|import|create)\b|"
    r"\b(?:singularity|apptainer)[ \t]+(?:exec|run|shell)\b|\blxc[ \t]+(?:exec|launch|config)\b",
    re.IGNORECASE,
)
_RUNTIMES = (
    ("pyxis", "enroot"),
    ("--container-image", "enroot"),
    ("enroot", "enroot"),
    ("apptainer", "apptainer"),
    ("singularity", "singularity"),
    ("lxc ", "lxd"),
    ("lxd", "lxd"),
)
# Secure Boot on, said, or shown by the kernel refusing an unsigned module (modprobe's "Key was rejected by service",
# insmod's "Required key not available")
_SECURE_BOOT = re.compile(
    r"secure ?boot(?: is)? enabled|secureboot enabled|secure boot: enabled|key was rejected by service|"
    r"required key not available",
    re.IGNORECASE,
)


_MAX_NAMED = 8
# The driver's halves, installed apart: `NVIDIA-Linux-x86_64-570.124.04.run --no-kernel-modules` and a kernel module
# built from `open-gpu-kernel-modules-570.124.06` (tinygrad's p2p fork, NVIDIA's open modules)
_USERSPACE_RUN = re.compile(
    r"NVIDIA-Linux-[\w]{1,12}-([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\.run\b[^\n]{0,80}--no-kernel-modules"
)
_OPEN_MODULES = re.compile(r"open-gpu-kernel-modules-([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)")


def _named_gpus(text: str, h: HostFacts) -> None:
    """The GPU models a line names, each once (by its words, case and spacing aside)."""
    for m in _GPU_NAMED.finditer(text):
        name = cap(m.group(1).strip())
        if all(_model_key(n) != _model_key(name) for n in h.gpus_named):
            h.gpus_named.append(name)
        if len(h.gpus_named) >= _MAX_NAMED:
            break
    if h.gpu_named is None and h.gpus_named:
        h.gpu_named = h.gpus_named[0]


def _model_key(name: str) -> str:
    return " ".join(name.lower().replace("nvidia", "").replace("geforce", "").replace("tesla", "").split())


def _driver_halves(text: str, low: str, h: HostFacts) -> None:
    if "nvidia-linux" in low and (run := _USERSPACE_RUN.search(text)):
        first(h, "userspace_driver_installed", run.group(1))
    if "open-gpu-kernel-modules" in low and (module := _OPEN_MODULES.search(text)):
        first(h, "kernel_module_installed", module.group(1))


def _said_in_prose(text: str, low: str, h: HostFacts) -> None:
    """What the reporter says they tried or saw: a reboot that did not help, another user for whom it works."""
    if "reboot" in low and _REBOOTED.search(text):
        h.rebooted = True
    # the line names users (or root): "works for A, but B doesn't" is then about them, not about two environments
    if any(w in low for w in ("user", "account", "root", "sudo")) and _OTHER_USER_WORKS.search(text):
        h.other_user_works = True


# A statement that nvidia-smi works where the reporter ran it, not a negation of it ("nvidia-smi works in the
# container", "I have good nvidia-smi in the docker container", "nvidia-smi shows the GPU").
_SMI_WORKS = re.compile(
    r"\b(?:good|working|fine|ok|okay) nvidia-smi\b|"
    r"\bnvidia-smi (?:works|is working|runs|is fine|is ok|shows (?:the|my|all|both|\d)|lists (?:the|my|all|\d)|"
    r"(?:output )?looks (?:fine|good|ok))",
    re.IGNORECASE,
)
_NEGATION = re.compile(r"\b(?:not|no|never|nothing|fails?|failed|error)\b|n't\b", re.IGNORECASE)


def _smi_works(text: str) -> bool:
    """The statement, in a sentence that negates nothing ("...in the docker container. But get this error." is two)."""
    for sentence in re.split(r"[.;!?]\s|\bbut\b", text, flags=re.IGNORECASE):
        if _SMI_WORKS.search(sentence) and not _NEGATION.search(sentence):
            return True
    return False


def extract(paste: Paste, env: Environment) -> None:
    h = env.host
    pci = 0
    for line in paste.facts():
        low = line.low
        if "nvidia-smi" in low and _smi_works(line.text):
            h.nvidia_smi_works_stated = True
        if low.startswith("ii ") or any(
            w in low for w in ("controller", "graphic", "nvrm", "driver", "gpu", "radeon", "rx", "gfx", "amd", "arc")
        ):
            pci += bool(_LSPCI.search(line.text))
            _hardware(line.text, low, env)
        _software(line.text, low, env)
        if "aarch64" in low and h.machine is None:  # uname -m, collect_env's platform, "an aarch64 box"
            h.machine = "aarch64"
        _jetson_and_conda(line.text, low, env)
        if len(h.gpus_named) < _MAX_NAMED and any(w in low for w in _GPU_WORDS):
            _named_gpus(line.text, h)
        _driver_halves(line.text, low, h)
        if ("secure" in low or "key" in low) and _SECURE_BOOT.search(line.text):
            h.secure_boot = True
        _said_in_prose(line.text, low, h)
    _container_facts(paste, env)
    _api_mismatch(paste, env)
    if pci:
        first(h, "pci_nvidia_devices", pci)
    for line in paste.lines:  # prose about the set-up, whoever wrote it, tells where the job runs
        if h.in_container is not None:
            break
        if any(w in line.low for w in _CONTAINER_HINTS) and _CONTAINER_WORDS.search(line.text):
            h.in_container = True
            first(h, "container_kind", "kubernetes" if "kube" in line.low or "pod" in line.low else "docker")
    _kernels(paste, h)
    first(h, "os_name", "windows" if paste.windows_prompt else None)
    first(h, "os_name", _os_field(paste))
    first(h, "os_name", os_from(" ".join(line.text for line in paste.lines[:400])))
    if h.wsl:
        h.os_name = "linux"


def _api_mismatch(paste: Paste, env: Environment) -> None:
    """dmesg prints the mismatch over two lines ("... client has the version X, but" / "NVRM: this kernel module has
    the version Y"): read the line with the next one joined on."""
    for line in paste.containing("api mismatch"):
        following = paste.window(line.index + 1, 1)
        joined = line.text + " " + (following[0].text if following else "")
        if m := _API_MISMATCH.search(joined):
            first(env.driver, "driver_version", version(m.group(1)))
            first(env.host, "proc_driver_version", m.group(2))
            return


def _jetson_and_conda(text: str, low: str, env: Environment) -> None:
    if any(word in low for word in _JETSON_WORDS):
        _jetson(text, env)
    if "__cuda=" in low and (m := _CONDA_CUDA.search(text)):  # conda info: the driver's own CUDA version
        first(env.driver, "cuda_driver_version", m.group(1))


def _jetson(text: str, env: Environment) -> None:
    h = env.host
    if m := _JETSON.search(text):
        first(h, "jetson", m.group(1))
        h.machine = h.machine or "aarch64"
    if (m := _JETPACK.search(text)) and (h.jetpack_version is None or h.jetpack_of_l4t):
        h.jetpack_version, h.jetpack_of_l4t = m.group(1), False  # the JetPack stated wins over the L4T's table
    if h.jetpack_version is None and (m := _L4T.search(text)):
        h.jetpack_version = _JETPACK_OF_L4T.get((m.group(1), m.group(2) or m.group(3)))
        h.jetpack_of_l4t = h.jetpack_version is not None
        first(h, "jetpack_major", _JETPACK_OF_L4T_MAJOR.get(m.group(1)))


def _kernels(paste: Paste, h: HostFacts) -> None:
    """What the kernel release tells, once the whole text is read: a Jetson's generation, WSL 2's kernel."""
    if h.jetson and h.jetpack_major is None:
        _jetson_kernel(paste, h)
    if h.wsl and h.wsl_version != 1 and h.wsl_kernel is None and h.kernel_stated:
        h.wsl_kernel = h.kernel_stated  # the kernel a WSL set-up states is WSL 2's own


def _jetson_kernel(paste: Paste, h: HostFacts) -> None:
    """The JetPack generation from the Tegra kernel's release, on any line (conda info's virtual packages)."""
    for line in paste.lines:
        if ("tegra" in line.low or "__linux=" in line.low) and (m := _TEGRA_KERNEL.search(line.text)):
            first(h, "jetpack_major", _JETPACK_OF_KERNEL[m.group(1) or m.group(2)])
            return


def _container_facts(paste: Paste, env: Environment) -> None:
    """A container shown by what ran in it or started it, and which runtime (enroot, singularity, LXD) it is."""
    h = env.host
    for line in paste.lines:
        low = line.low
        if not (
            "docker" in low
            or "container" in low
            or "enroot" in low
            or "singularity" in low
            or "lxc" in low
            or "apptainer" in low
            or "gpu functionality" in low
            or "srun" in low
            or "salloc" in low
        ):
            continue
        if line.fact and h.container_evidence is None and (m := _CONTAINER_FACT.search(line.text)):
            h.container_evidence = cap(m.group(0))
            h.in_container = True
        kind = next((k for word, k in _RUNTIMES if word in low), None)
        if kind and (line.fact or line.prompt) and h.container_kind in (None, "docker"):
            h.container_kind = kind


def _hardware(text: str, low: str, env: Environment) -> None:
    h = env.host
    other = _OTHER_GPU.search(text) or _OTHER_GPU_NAME.search(text)
    # A line naming NVIDIA too may be a hybrid laptop's; it counts where it says NVIDIA is absent ("no NVIDIA driver").
    absent = _NO_GPU.search(text) or "no nvidia" in low
    if other and len(h.other_gpus) < MAX_ITEMS and ("nvidia" not in low or absent):
        name = cap(other.group(1).strip())
        h.other_gpus.append(f"Intel Arc{name[3:]}" if name.lower().startswith("arc") else name)  # the maker, named
    elif "integrated" in low and _INTEL_IGPU_SAID.search(text) and "Intel integrated GPU" not in h.other_gpus:
        h.other_gpus.append("Intel integrated GPU")  # "my Intel CPU also has an integrated GPU"
    if m := _NVRM_VERSION.search(text):
        first(h, "proc_driver_version", m.group(1))
    if m := _DRIVER_PACKAGE.search(text):
        first(env.driver, "driver_version", version(m.group(1) or m.group(2)))
    if _NO_GPU.search(text):
        h.no_gpu_stated = True
    if env.driver.driver_version is None and "driver" in low and (m := _PROSE_DRIVER.search(text)):
        env.driver.driver_version = version(m.group(1) or m.group(2))


# The Python a traceback or a pip log ran: its site-packages folder ("/lib/python3.8/site-packages/torch/...",
# "\\Python310\\lib\\site-packages\\torch"). Read after every other source, which name it outright.
_SITE_PACKAGES = re.compile(
    r"[/\\]python(3)\.([0-9]{1,2})[/\\](?:site|dist)-packages[/\\]|[/\\]Python(3)([0-9]{1,2})[/\\]lib[/\\]site-packages",
    re.IGNORECASE,
)


def python_from_paths(text: str, env: Environment) -> None:
    """The job's Python from the site-packages path of its packages, where nothing named it."""
    if env.host.python_version is None and (m := _SITE_PACKAGES.search(text)):
        major, minor = (g for g in m.groups() if g is not None)
        env.host.python_version = f"{major}.{minor}"


def _versions(text: str, low: str, env: Environment) -> None:
    """The CUDA toolkit, the Python, and an install spec's torch, where a line states them."""
    h = env.host
    if "compilation tools" in low and (m := _NVCC.search(text)):
        first(h, "cuda_toolkit_version", m.group(1))
    if low.startswith("python") and (m := _BANNER.match(text.strip())):
        first(h, "python_version", m.group(1))
    if "python" in low and (m := _PYTHON_STATED.match(text) or _PYTHON_IN_USE.search(text)):
        first(h, "python_version", m.group(1))
    if "+" in text and "torch" in low and (m := _SPEC_TORCH.search(text)):
        _install_spec(text, m, env)


def _install_spec(text: str, torch_spec: re.Match[str], env: Environment) -> None:
    first(env.torch, "version", version(torch_spec.group(1)))
    for part in _SPEC_PART.finditer(text, torch_spec.end() - 1):
        if part.group(1).lower() == "python":
            first(env.host, "python_version", part.group(2))
        else:
            first(env.host, "cuda_toolkit_version", part.group(2))


def _windows_and_kernel(text: str, low: str, h: HostFacts) -> None:
    if "windows" in low and (m := _WINDOWS_BUILD.search(text)):
        first(h, "windows_build", int(m.group(1)))
    if "kernel" in low and (m := _KERNEL_STATED.search(text)):  # "Kernel Version 5.4.72" in a WSL set-up list
        first(h, "kernel_stated", m.group(1))


def _software(text: str, low: str, env: Environment) -> None:
    h = env.host
    _versions(text, low, env)
    if " on " in low and (m := _PLATFORM.search(low)):
        first(h, "os_name", os_from(m.group(1)))
    if low.startswith("root@") and _DOCKER_HOST.match(text):
        h.in_container, h.container_kind = True, h.container_kind or "docker"
        first(h, "container_evidence", "a container's shell prompt (root@<container id>)")
    _windows_and_kernel(text, low, h)
    if "microsoft" in low and _WSL1_KERNEL.search(text):
        h.wsl, h.wsl_version = True, 1  # the kernel is the fact; what the reporter calls it is not
    elif ("wsl" in low or "microsoft" in low or "subsystem" in low) and _WSL.search(text):
        if "microsoft-standard" in low:
            h.wsl, h.wsl_version = True, h.wsl_version or 2
            if kernel := _WSL2_KERNEL.search(text):
                first(h, "wsl_kernel", kernel.group(1))
        elif not text.rstrip().endswith("?"):  # "Is it possible to run in WSL?" asks; it does not say where it runs
            h.wsl = True
    if not h.wsl and "/mnt/" in low and _WSL_DRIVE_PATH.search(text):
        h.wsl = True  # a Linux path into a Windows drive (/mnt/c/Users/...): WSL's mount of it
    if h.virtual_machine is None and (vm := next((name for key, name in _VM_DISPLAY if key in low), None)):
        h.virtual_machine = vm
    if ("colab" in low or "/content/" in low) and _COLAB.search(text):
        first(h, "runtime", "colab")


# An issue form's or template's field for the OS: "### Operating system" with the answer on the next line, or
# "**OS**: Linux", "- OS: Windows 11". Read before the whole text's words, where a joke ("I am not using Windows 7")
# or a link named the other system (trial 10).
_OS_HEADING = re.compile(r"^[ \t]*#{1,6}[ \t]*(?:operating system|os|platform)(?: version)?[ \t]*$", re.IGNORECASE)
_OS_FIELD = re.compile(
    r"^[ \t]*[-*]?[ \t]*\**[ \t]*(?:operating system|os)(?: version)?[ \t]*\**[ \t]*[:：][ \t]*\**[ \t]*(\S.{0,80})",
    re.IGNORECASE,
)


def _os_field(paste: Paste) -> str | None:
    for line in paste.facts():
        if "os" not in line.low and "operating" not in line.low:
            continue
        if m := _OS_FIELD.match(line.text):
            return os_from(m.group(1))
        if _OS_HEADING.match(line.text):
            answer = next((n.text for n in paste.window(line.index + 1, 3) if n.text.strip()), "")
            return os_from(answer)
    return None


# Python's own build banner on Windows ("[MSC v.1929 64 bit (AMD64)]"), nvidia-smi's driver model (WDDM is
# Windows' alone), and a drive letter's path.
_WINDOWS = re.compile(
    r"\bwin32\b|\bwindows(?: ?1[01])?\b|\bwin1[01]\b|win_amd64|\[msc v\.|\bwddm\b|\b[a-z]:\\(?=[\w$])"
)


def os_from(text: str) -> str | None:
    low = text.lower()
    if _WINDOWS.search(low):
        return "windows"
    if re.search(r"\bmacos\b|\bdarwin\b|mac osx|macosx|\bmacbook\b", low):
        return "darwin"
    if re.search(r"\blinux\b|ubuntu|debian|centos|red hat|fedora|manylinux|/usr/|/opt/|/home/", low):
        return "linux"
    return None
