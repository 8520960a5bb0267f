"""A Mac's part of a pasted report: the macOS version, what torch answers about MPS (Apple's GPU), and MPS's own error.

MPS needs a minimum macOS that has risen with torch releases (data/cuda_tables.py `MPS_MIN_MACOS`), and torch's
error for it has stated an older minimum than the release needs (pytorch#139425, #164943): the version is read here,
the rule compares it with the table, and the error's own figure is kept only as what the error said.
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import accelerator_answer, fail_wins, first
from gputriage.collectors.env_text.lines import Paste
from gputriage.record.environment import Environment

# "OS: macOS 12.2.1 (arm64)" (collect_env), "Python platform: macOS-12.2.1-arm64-arm-64bit", "ProductVersion: 12.7.6"
# (sw_vers), "macOS-12.7.6-arm64-arm-64bit" in prose.
_MACOS_FACT = re.compile(
    r"\bOS:[ \t]*mac ?OS[ \t]+([0-9]{2}\.[0-9]{1,2}(?:\.[0-9]{1,2})?)\b|"
    r"\bmacOS-([0-9]{2}\.[0-9]{1,2}(?:\.[0-9]{1,2})?)-(?:arm64|x86_64)|"
    r"^[ \t]*ProductVersion:[ \t]*([0-9]{2}\.[0-9]{1,2}(?:\.[0-9]{1,2})?)[ \t]*$",
    re.IGNORECASE,
)
# "on macOS 13.7.4", "MacOS Ventura 13.4", "my macOS is `12.7.6`": prose, read last; never the "MacOS 13.0+" of MPS's
# own error.
_MACOS_PROSE = re.compile(
    r"\bmac ?OS(?:[ \t]+(?:version|Monterey|Ventura|Sonoma|Sequoia|Tahoe|Big Sur))?"
    r"(?:[ \t]+is[ \t]+|[ \t]*[:=][ \t]*|[ \t]+)[`'\"]?"  # "macOS 13.4", "my macOS is `12.7.6`", "macOS: 14.1"
    r"([0-9]{2}\.[0-9]{1,2}(?:\.[0-9]{1,2})?)(?![0-9.]*\+)",
    re.IGNORECASE,
)
# "The MPS backend is supported on MacOS 12.3+." (torch's error when MPS cannot be used on this macOS)
_MPS_ERROR = re.compile(r"MPS backend is supported on mac ?OS[ \t]+([0-9]{2}\.[0-9]{1,2})\+", re.IGNORECASE)
# "Is MPS available? False", "Is MPS (Metal Performance Shader) built? True", "mps available: False",
# "torch.backends.mps.is_available() returns False"
_MPS_ANSWER = re.compile(
    r"\b(?:is[ \t]+)?MPS\b[^?:=\n]{0,40}?\b(?P<what>available|built)\b\??[ \t]*[:=]?[ \t]*(?P<value>True|False)\b|"
    r"\bmps\.(?P<call>is_available|is_built)\(\)[)`'\"]{0,3}[ \t]*(?:returns?|returned|gives?|gave|is|prints?|"
    r"printed|shows?|=>|=+|:|->)?[ \t]*[`'\"]?(?P<said>True|False)\b",
    re.IGNORECASE,
)
# MPS named as the device the job uses or asks about: torch.backends.mps, device("mps"), "MPS" as a word
_MPS_NAMED = re.compile(r"\bbackends\.mps\b|[\"']mps[\"']|\bMPS\b")
# The answer on the line after a REPL call: ">>> torch.backends.mps.is_available()" then "False".
_MPS_CALL = re.compile(r"\bmps\.(is_available|is_built)\(\)[ \t)]*$")


# An x86_64 Python on macOS (collect_env's OS and platform lines), and an Apple silicon CPU (collect_env's "CPU:" line
# is followed by its brand string, "Apple M2 Pro"; sysctl's machdep.cpu.brand_string says the same)
_X86_MAC = re.compile(r"\bOS:[ \t]*mac ?OS[^\n(]{0,20}\(x86_64\)|\bmacOS-[0-9.]{2,10}-x86_64\b", re.IGNORECASE)
_APPLE_SILICON = re.compile(
    r"^[ \t]*(?:CPU:[ \t]*)?Apple M[1-9](?:[ \t]+(?:Pro|Max|Ultra))?[ \t]*$|\bbrand_string:[ \t]*Apple M[1-9]"
)


def _rosetta(paste: Paste, env: Environment) -> None:
    """An x86_64 Python on an Apple silicon CPU: Rosetta."""
    x86 = any(_X86_MAC.search(line.text) for line in paste.containing("x86_64"))
    apple = any(_APPLE_SILICON.search(line.text) for line in paste.containing("apple m"))
    if x86 and apple:
        env.host.rosetta, env.host.machine = True, env.host.machine or "x86_64"


def extract(paste: Paste, env: Environment) -> None:
    h, t = env.host, env.torch
    prose: str | None = None
    _rosetta(paste, env)
    for line in paste.containing("mac", "productversion", "mps", "os:"):
        text = line.text
        if (m := _MACOS_FACT.search(text)) and h.macos_version is None:
            h.macos_version = next(g for g in m.groups() if g)
        elif prose is None and (m := _MACOS_PROSE.search(text)):
            prose = m.group(1)
        if m := _MPS_ERROR.search(text):
            first(t, "mps_error_min_macos", m.group(1))
            t.other_accelerators["mps"] = False
        for answer in _MPS_ANSWER.finditer(text):
            _record(env, answer.group("what") or answer.group("call"), answer.group("value") or answer.group("said"))
        if _MPS_NAMED.search(text):
            t.mps_named = True
        if (call := _MPS_CALL.search(text)) and line.index + 1 < len(paste.lines):
            _record(env, call.group(1), paste.lines[line.index + 1].text.strip())
    first(h, "macos_version", prose)
    if h.macos_version is not None or "mps" in t.other_accelerators:
        h.os_name = h.os_name or "darwin"


def _record(env: Environment, what: str, answer: str) -> None:
    value = {"true": True, "false": False}.get(answer.strip("`'\" ").lower())
    if value is None:
        return
    if "built" in what.lower():
        fail_wins(env.torch, "mps_built", value)
    else:
        accelerator_answer(env, "mps", value)
