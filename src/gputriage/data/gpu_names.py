"""The compute capability of NVIDIA GPUs by the name that nvidia-smi, collect_env and people print.

nvidia-smi's table and collect_env name the GPU but not its compute capability; with it, a pasted report can be
checked against the build's arch list (an RTX 5090, sm_120, next to torch 2.6.0+cu126 has no kernels to run).
Source: NVIDIA, "CUDA GPUs - Compute Capability" (https://developer.nvidia.com/cuda-gpus) and the CUDA C Programming
Guide's compute capability table. Patterns are tried in order; the first match wins, so the specific ones come first.
A name that matches none stays unknown.
"""

from __future__ import annotations

import re

# The RTX-only model numbers (20xx to 50xx) also match "GTX": "GTX 3090" is a slip for the RTX 3090 (no GTX card has
# such a number), and the card it names is not in doubt.
_CAPABILITIES: tuple[tuple[str, str], ...] = (
    # Blackwell (the RTX PRO brand began with it: "RTX PRO 6000" is one, with or without "Blackwell")
    (r"\bb(?:100|200|300)\b|\bgb(?:200|300)\b", "10.0"),
    (r"\b[rg]tx ?50[5-9]0|rtx pro [0-9]{4}\b|\bdgx spark\b|\bgb10\b", "12.0"),
    # Hopper
    (r"\bh(?:100|200|800|20)\b|\bgh200\b", "9.0"),
    # Ada
    (r"\b[rg]tx ?40[5-9]0|\bl4\b|\bl40s?\b|rtx [0-9]{4} ada|rtx 6000 ada", "8.9"),
    # Ampere
    (r"\ba100\b|\ba30\b|\ba800\b", "8.0"),
    (r"\b[rg]tx ?30[5-9]0|\ba(?:2|10g?|16|40)\b|rtx a[0-9]{4}|\ba[0-9]{4}\b", "8.6"),
    (r"\bjetson orin|\borin\b", "8.7"),
    # Turing
    (r"\b[rg]tx ?20[6-8]0|\bgtx ?16[5-6]0|\bt4\b|quadro rtx|titan rtx|\bt[0-9]{3,4}\b", "7.5"),
    # Volta
    (r"\bv100\b|titan v\b|\bgv100\b", "7.0"),
    (r"\bxavier\b", "7.2"),
    # Pascal
    (r"\bp100\b", "6.0"),
    (r"\bgtx ?10[5-8]0|titan xp\b|titan x \(pascal\)|\bp(?:4|40|6)\b|quadro p[0-9]{3,4}|\bmx[1-3][0-9]0\b", "6.1"),
    (r"\bjetson tx2|\btx2\b", "6.2"),
    # Maxwell
    (r"\bgtx ?9[5-8]0\b|gtx titan x\b|\bm(?:4|40|60|6000)\b|quadro m[0-9]{3,4}", "5.2"),
    (r"\bgtx ?(?:745|750(?: ti)?|8[5-6]0m|9[5-6]0m)\b|\b9[2-4]0mx?\b|\b8[2-4]0m\b", "5.0"),
    (r"\bjetson nano|\btx1\b", "5.3"),
    # Kepler
    (r"\bk80\b", "3.7"),
    (r"\bk(?:20|40)[cmx]?\b|gtx ?780|titan black|gtx titan\b", "3.5"),
    (r"\bgtx ?(?:6[6-9]0|7[67]0)\b|\bk(?:10|520)\b|gt ?7[45]0m", "3.0"),
    # Fermi
    (r"\bgtx ?(?:4[6-8]0|5[6-8]0)\b|\bgtx 670m\b|quadro 600\b", "2.1"),
)
_COMPILED = tuple((re.compile(pattern, re.IGNORECASE), cc) for pattern, cc in _CAPABILITIES)


def capability_of(name: str) -> str | None:
    """ "NVIDIA GeForce RTX 3090" -> "8.6"; None when the name is unknown (or cut short: "NVIDIA GeForce ...")."""
    text = name[:120]
    for pattern, capability in _COMPILED:
        if pattern.search(text):
            return capability
    return None
