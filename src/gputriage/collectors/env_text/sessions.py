"""What people ask torch and what it answers: REPL sessions (`>>>`, `In [7]:` / `Out[7]:`), `python -c "..."`, bare
`print(...)` code followed by its output, "label:" prints, and prose ("torch.cuda.is_available() returns Flase").

A question is one of torch's queries (is_available, device_count, __version__, version.cuda, get_arch_list); its
answers are the value lines that follow it, in order, skipping warnings and tracebacks printed in between.
"""

from __future__ import annotations

import re

from gputriage.collectors.env_text.facts import accelerator_answer, fail_wins, first, other_gpu
from gputriage.collectors.env_text.limits import MAX_ITEMS, cap, small_int, version
from gputriage.collectors.env_text.lines import Line, Paste
from gputriage.record.environment import Environment

_QUERY = re.compile(
    r"(\w{1,20})\.(?:cuda\.)?(is_available|device_count|get_arch_list)\(\)|"
    r"(\w{1,20})\.(__version__|version\.cuda)\b"
)
_HAS_DIGIT = re.compile(r"device_count\W{0,12}[0-9]")
_QUERY_WORDS = ("available", "device_count", "version", "arch_list", "count", "gpus", "devices", "torch", "cuda")
_MAX_QUERIES = 400  # a report asks torch a handful of times; a paste asking more is not a session to follow
_TRUE = ("true", "ture", "treu", "yes")
_FALSE = ("false", "flase", "fasle", "fales", "flse", "no")
# An answer line: the value alone, as IPython shows it, after a comment mark ("# True" under the command), or in the
# reporter's words ("results in TRUE", "returns False")
_VALUE = re.compile(
    r"^(?:Out\[[0-9]{1,5}\]:[ \t]*|#[ \t]*|(?:results?[ \t]+in|returns?|gives?|prints?|outputs?)[ \t]+)?"
    r"['\"`]?([\w.+\-]{1,60})['\"`]?[ \t]*\.?[ \t]*$",
    re.IGNORECASE,
)
# The answer said just before the command (or the lone call) that gave it: "I keep getting FALSE for" / (blank) /
# "python3 -c ...", "the following returns false" / "`torch.cuda.is_available()`".
_ANSWER_BEFORE = re.compile(
    r"\b(?:get|getting|got|returns?|returned|gives?|gave|shows?|prints?|printed)[ \t]+[`'\"*]*(?P<value>true|false)\b"
    r"[`'\"*]*[ \t]*(?:for|from|with|when running|running|on)?[ \t]*:?[ \t]*$",
    re.IGNORECASE,
)
_LIST = re.compile(r"^(?:Out\[[0-9]{1,5}\]:[ \t]*)?(\[(?:'[\w]{1,12}'(?:,[ \t]*)?){1,40}\])")
_PROSE = re.compile(
    r"(?:(?:torch\.)?cuda\.(?P<what>is_available|device_count)\b(?:\(\))?|"
    r"\b(?P<bare>is_available|device_count)\(\))"  # bare `is_available()`: the call's parentheses say it is torch's
    r"[)`'\"]{0,3}[ \t]*"  # print(torch.cuda.is_available()) gives ..., 'torch.cuda.is_available()' always ...
    r"(?:[ \t]+in[ \t]+python[0-9.]*)?"  # "when I type in torch.cuda.is_available() in python3, it bounced back"
    r"(?:,[ \t]*(?:it|this|that)[ \t]+)?"  # "if I run `torch.cuda.is_available()`, it shows True"
    r"(?:(?:is[ \t]+)?(?:able[ \t]+to|now|finally)[ \t]+)?"  # "is able to return true now", "now returns True"
    r"(?:returns?|returned|returning|is returning|is still|is[ \t]+(?:showing|giving|printing)|is|shows?|showing|"
    r"gives?|giving|gave|prints?|printed|"
    r"(?:bounced|comes|came)[ \t]+back|"
    r"outputs?|output|says?|said|yields?|evaluates to|=+|-+>|→|:|"
    # 也返回True, 就是False, 发现是False: a few CJK words before the verb
    r"[\u4e00-\u9fff]{0,4}?(?:返回(?:为|值为|的是|了)?|输出(?:为|了)?|显示(?:为)?|结果(?:为|是)|为|是))?"
    r"[ \t]*(?:always[ \t]+|still[ \t]+|only[ \t]+|as[ \t]+)?"
    r"(?:returns?[ \t]+)?[`'\"*]*(?P<value>true|false|ture|flase|fasle|[0-9]{1,3})\b",
    re.IGNORECASE,
)
# The answer before the question: "i get False when i run torch.cuda.is_available()".
_PROSE_BEFORE = re.compile(
    r"\b(?:get|got|getting|see|saw|returns?|returned|shows?|showed|prints?|printed)[ \t]+[`'\"*]*"
    r"(?P<value>true|false|ture|flase|fasle)\b[`'\"*]*[ \t]+(?:when(?:ever)?|if|after|from|for|on|with|by|"
    r"running|calling|checking)\b[^!?]{0,60}?\bis_available\b",
    re.IGNORECASE,
)
# The accelerator a bare `is_available()` belongs to, written just before it: `torch.xpu.`, `torch.backends.mps.`.
_ACCELERATOR_BEFORE = re.compile(r"\b(xpu|mps)\.$", re.IGNORECASE)
_PRINT_LABEL = re.compile(r"^[ \t]*(?:cuda available|is cuda available|gpu available)[ \t]*:?[ \t]*$", re.IGNORECASE)
# A script's own labelled prints and the reporter's set-up lists: "torch version: 2.2.1", "cuda available: Flase",
# "cuda version: None", "GPU count: 0", "- CUDA: 11.3", "--pytorch 1.10.0", "pytorch version 1.10".
_LABELLED = re.compile(
    r"^[ \t]*(?:[-*•+]{1,2}[ \t]*)?(?:(?P<version>(?:py)?torch(?:[ \t]+version|\.__version__)?)|"
    r"(?P<avail>(?:is[ \t]+)?(?:torch[ \t]+)?cuda(?:[ \t]+is)?[ \t]+available\??|torch\.cuda\.is_available\(\))|"
    r"(?P<cuda>(?:torch[ \t]+)?cuda(?:[ \t]+version)?|torch\.version\.cuda)|"
    r"(?P<count>(?:cuda[ \t]+)?(?:device|gpu)[ \t]+count|number[ \t]+of[ \t]+(?:cuda[ \t]+)?(?:gpus|devices)|"
    r"torch\.cuda\.device_count\(\)))"
    r"(?:[ \t]*[:=][ \t]*|[ \t]+)['\"]?(?P<value>[\w.+\-]{1,40})['\"]?[ \t]*$",
    re.IGNORECASE,
)
# "PyTorch 2.5.1 cannot find MPS device", "with torch 1.13 I get": the version named in prose, read last (any other
# source of the version wins).
_PROSE_VERSION = re.compile(
    # "torch 1.13", "torch is 1.13.1", "- torch: 2.11.0.dev20260129 (also tested 2.10.0)"
    r"\b(?:py)?torch(?:[ \t]+version)?(?:[ \t]*(?:=|==|:)[ \t]*|[ \t]+(?:is[ \t]+)?)"
    # the build tag spaced out ("PyTorch 2.8.0 + cu129") is the same tag
    r"v?([0-9]\.[0-9]{1,2}(?:\.[0-9]{1,2})?(?:[ \t]?\+[ \t]?(?:cu|rocm|cpu|xpu)\w{0,10}|\+\w{2,12})?)\b",
    re.I,
)
_TAGGED_VERSION = re.compile(r"\b([0-9]\.[0-9]{1,2}(?:\.[0-9]{1,2})?(?:\.dev[0-9]{8})?)\+(?:cu[0-9]{2,3}|cpu|rocm|xpu)")
_SKIP = ("warn", "return torch._c", "(triggered internally", "traceback", "  file ", "userwarning")
# The banner Ultralytics (YOLOv5/v8/11) prints at start: the torch build, and the device select_device chose, named
# with its memory only when torch.cuda.is_available() was True ("torch-2.6.0+cu126 CUDA:0 (NVIDIA GeForce RTX 4080
# SUPER, 16376MiB)"), else "CPU", or nothing when the device asked for was refused. One banner is one session: its
# own torch and answer.
_BANNER = re.compile(
    r"(?:\bPython-(?P<python>[0-9]\.[0-9]{1,2}(?:\.[0-9]{1,2})?)\s+)?"
    r"\btorch[- ](?P<torch>[0-9]+\.[0-9]+\.[0-9]+[\w.+]*)"
    # no device after it: the banner of a run whose select_device raised ("Invalid CUDA 'device=0' requested")
    r"(?:\s+(?:CUDA:[0-9]+(?:,[0-9]+)*\s*\((?P<gpu>[^,()]{3,80}),\s*[0-9]+\s*MiB\)|(?P<cpu>CPU)\b)|[ \t]*$)"
)
# An app's log naming the device torch gave it (ComfyUI's "Device: xpu:0 Intel(R) Arc(TM) A770 Graphics", a
# `torch.xpu.get_device_name` print): torch reached the Intel GPU, the job runs there.
_XPU_DEVICE = re.compile(r"\bxpu:[0-9]{1,2}[ \t]+(Intel\S*[ \t].{2,80}?)[ \t]*$", re.IGNORECASE)
_OTHER_GPU_LIBS = ("cupy", "tensorflow", "tf", "jax", "numba")


def extract(paste: Paste, env: Environment) -> None:
    lines = paste.lines
    asked = 0
    session: list[str | None] = [None]  # the torch version the current interpreter printed
    # collect_env's "Is CUDA available" (the only extractor before this one that answers it) is one session too: a
    # False printed elsewhere in the paste came from another interpreter or environment, not from this one.
    collect_env_said = env.torch.is_available
    answers_by_version: list[tuple[str | None, bool]] = (
        [(env.torch.version, collect_env_said)] if collect_env_said is not None else []
    )
    grouped: set[int] = set()  # code lines already asked with the one before them
    cuda_of: dict[str, str] = {}  # torch.version.cuda as each session's torch printed it
    for line in paste.facts():
        if line.prompt and line.low.strip() in ("import torch", "python", "python3"):
            session[0] = None  # a new interpreter (or a fresh import): a new session
        if "torch" in line.low and (banner := _BANNER.search(line.text)) and _is_banner(banner):
            _banner_session(banner, env, answers_by_version)
        if "xpu:" in line.low and (xpu := _XPU_DEVICE.search(line.text)):
            _xpu_in_use(xpu, env)
        if not any(word in line.low for word in _QUERY_WORDS):
            continue
        queries = list(_QUERY.finditer(line.text)) if asked < _MAX_QUERIES and line.index not in grouped else []
        asked += bool(queries)
        if queries and _asks(line):
            group = _code_group(lines, line)
            grouped.update(g.index for g in group[1:])
            asked_here = [(q, g) for g in group for q in (_QUERY.finditer(g.text) if g is not line else queries)]
            answers = _answers_after(lines, group[-1].index + 1, len(asked_here)) or _answer_before(lines, line)
            for (query, asking), answer in zip(asked_here, answers, strict=False):
                _record(env, query, answer, asking)
                _follow_session(query, answer, session, answers_by_version, cuda_of)
        _prose_answer(line, env)
        _printed_label(lines, line, env)
        _answer_in_next_line(lines, line, env)
        _labelled_print(line, env)
    if collect_env_said is True and env.torch.is_available is False:
        answers_by_version.append((None, False))  # said in prose or a print: the version it ran is not known
    _sessions_disagree(answers_by_version, env, cuda_of)


def _xpu_in_use(xpu: re.Match[str], env: Environment) -> None:
    accelerator_answer(env, "xpu", True)
    other_gpu(env, xpu.group(1))


def _is_banner(banner: re.Match[str]) -> bool:
    """A banner names the device after the build; one that names none is Ultralytics' own `torch-2.6.0+cu126` (a
    run whose select_device raised), not prose that ends with a version ("Using torch 2.8.0.dev20250321+xpu")."""
    return bool(banner.group("gpu") or banner.group("cpu")) or banner.group(0).lstrip().startswith(
        ("Python-", "torch-")
    )


def _banner_session(banner: re.Match[str], env: Environment, answers: list[tuple[str | None, bool]]) -> None:
    """A framework's start banner: the torch it runs, and whether torch reached the GPU it names. "CPU" says so only
    for a build without CUDA (+cpu); with a CUDA build it may be the user's own choice of device."""
    t, v = env.torch, version(banner.group("torch"))
    first(env.host, "python_version", version(banner.group("python") or ""))
    first(t, "version", v)
    fail_wins(t, "installed", True)
    if banner.group("gpu"):
        first(env.host, "gpu_named", banner.group("gpu").strip())
        answers.append((v, True))
        fail_wins(t, "is_available", True)
    elif "+cpu" in banner.group("torch"):
        answers.append((v, False))
        fail_wins(t, "is_available", False)


def _follow_session(
    query: re.Match[str],
    answer: str,
    session: list[str | None],
    answers: list[tuple[str | None, bool]],
    cuda_of: dict[str, str],
) -> None:
    what = query.group(2) or query.group(4)
    if (query.group(1) or query.group(3)) not in ("torch", "cuda"):
        return  # `torchvision.__version__`: another package's answer, not the session's torch
    if what == "__version__" and (v := version(answer)):
        session[0] = v
    elif what == "is_available" and (flag := _bool(answer)) is not None:
        answers.append((session[0], flag))
    elif what == "version.cuda" and session[0] is not None and (cuda := version(answer)):
        cuda_of[session[0]] = cuda  # judged with its own session's torch, not the first one printed


_CUDA_BUILD_TAG = re.compile(r"\+cu[0-9]{2,3}\b|\.nv[0-9]{2}\.[0-9]{1,2}\b")


def _sessions_disagree(answers: list[tuple[str | None, bool]], env: Environment, cuda_of: dict[str, str]) -> None:
    """Two sessions in one report (two containers, before and after): one torch answers is_available() True, another
    build answers False. The build is the difference: the failing one is judged, and when only the working one
    carries a CUDA build tag (`+cu121`, NVIDIA's `nv23.05`), the failing one is a build without CUDA."""
    t = env.torch
    if not (any(ok for _, ok in answers) and any(not ok for _, ok in answers)):
        return
    working = next((v for v, ok in answers if ok and v), None)
    t.available_elsewhere = working or "unknown"
    failing = next((v for v, ok in answers if not ok and v and v != working), None)
    if working is None:
        return
    if failing is None:
        if t.version == working and all(v in (None, working) for v, ok in answers if not ok):
            t.version = None  # only the working session printed a version: the failing build is not known
            if len(t.other_versions) < MAX_ITEMS:
                t.other_versions.append(working)
        return
    t.version = failing
    if failing in cuda_of:
        t.cuda_version = cuda_of[failing]
    t.cuda_elsewhere = cuda_of.get(working)
    if working not in t.other_versions and len(t.other_versions) < MAX_ITEMS:
        t.other_versions.append(working)
    if _CUDA_BUILD_TAG.search(working) and not _CUDA_BUILD_TAG.search(failing) and "+" not in failing:
        first(
            t,
            "cpu_build_evidence",
            f"torch {failing} answers is_available() False where torch {working} in the same report answers True",
        )


def _code_group(lines: list[Line], line: Line) -> list[Line]:
    """A bare code line that asks torch, with the code lines right after it that ask too (blank lines and imports
    between): a snippet pasted whole, then what it printed, in order ("print(torch.__version__)",
    "torch.cuda.is_available()", "returns:", "1.3.1", "False"). A line typed at a prompt is answered right below."""
    group = [line]
    if line.prompt:
        return group
    for after in lines[line.index + 1 : line.index + 8]:
        text = after.text.strip()
        if not text or text.startswith(("import ", "from ")):
            continue
        if after.fact and not after.prompt and _QUERY.search(text) and _asks(after):
            group.append(after)
            continue
        break
    return group


def _asks(line: Line) -> bool:
    """A line that asks torch (typed at a prompt, in `python -c`, or a bare code line), not prose about it."""
    text = line.text.strip()
    return line.prompt or text.startswith(("print(", "torch.", "import torch", "python", "`torch.")) or "-c " in text


def _answer_before(lines: list[Line], line: Line) -> list[str]:
    """The answer in the line just above the command (blank lines between), in the reporter's words."""
    for before in reversed(lines[max(0, line.index - 3) : line.index]):
        if before.text.strip():
            said = _ANSWER_BEFORE.search(before.text)
            return [said.group("value")] if said else []
    return []


def _answers_after(lines: list[Line], start: int, count: int) -> list[str]:
    answers: list[str] = []
    for line in lines[start : start + 14]:
        if line.fact and not line.prompt and _QUERY.search(line.text) and _asks(line):
            break  # the next command that asks torch: what follows answers it, not this one
        if len(answers) == count or not line.fact:
            break  # a line that is no fact (output the reporter expects, a suggestion) answers nothing
        text = line.text.strip()
        if line.prompt and not _bool(text):  # the next command: no more answers to this one
            if _QUERY.search(text):
                break
            continue
        if not text or any(s in line.low for s in _SKIP) or text.startswith(("^", "File ", "-")):
            continue
        listed = _LIST.match(text)
        value = _VALUE.match(text)
        if listed:
            answers.append(listed.group(1))
        elif value:
            answers.append(value.group(1))
    return answers


def _record(env: Environment, query: re.Match[str], answer: str, line: Line) -> None:
    t = env.torch
    owner = query.group(1) or query.group(3)
    what = query.group(2) or query.group(4)
    if owner == "xpu" and what == "is_available":  # torch.xpu.is_available(): the Intel GPU's answer, not CUDA's
        accelerator_answer(env, "xpu", _bool(answer))
        return
    if owner not in ("torch", "cuda"):
        return
    if what == "is_available" and (value := _bool(answer)) is not None:
        other = _library_used_before(line.text, query.start())
        if other and value is False:
            first(t, "init_conflict", other)
            return
        fail_wins(t, "is_available", value)
        fail_wins(t, "installed", True)
        if value is False:
            first(t, "unavailable_command", cap(line.text.strip()))
    elif what == "device_count" and (count := small_int(answer, 4096)) is not None:
        first(t, "device_count", count)
    elif what == "__version__" and (v := version(answer)):
        first(t, "version", v)
        fail_wins(t, "installed", True)
    elif what == "version.cuda":
        if answer == "None":
            first(t, "cpu_build_evidence", "torch.version.cuda is None")
        else:
            first(t, "cuda_version", version(answer))
    elif what == "get_arch_list" and answer.startswith("["):
        first(t, "arch_list", re.findall(r"(?:sm|compute)_[0-9]{2,3}a?", answer)[:40] or None)


def _prose_answer(line: Line, env: Environment) -> None:
    """ "torch.cuda.is_available() returns False", "is_available()=false", "torch.cuda.is_available ---> false"."""
    if not any(word in line.low for word in ("true", "false", "ture", "flase", "fasle")) and not _HAS_DIGIT.search(
        line.text
    ):
        return
    for match in _PROSE.finditer(line.text):
        value = match.group("value").lower()
        owner = _ACCELERATOR_BEFORE.search(line.text[: match.start()]) if match.group("bare") else None
        if owner is not None:  # "torch.xpu.is_available() returns True": another accelerator's answer
            if owner.group(1).lower() == "xpu" and match.group("bare").lower() == "is_available":
                accelerator_answer(env, "xpu", _bool(value))
            continue  # MPS's: read by the macOS extractor
        if (match.group("what") or match.group("bare")).lower() == "device_count":
            first(env.torch, "device_count", small_int(value, 4096))
        elif (flag := _bool(value)) is not None:
            fail_wins(env.torch, "is_available", flag)
    for match in _PROSE_BEFORE.finditer(line.text):
        fail_wins(env.torch, "is_available", _bool(match.group("value")))


# Prose that wraps after the call: "when running\n   torch.cuda.is_available()\ni get false".
_CALL_ALONE = re.compile(r"^[ \t`>]*(?:torch\.)?cuda\.is_available\(\)[ \t`]*$")
_ANSWER_SAID = re.compile(
    r"^[ \t]*(?:(?:i|we|it)[ \t]+)?(?:get|got|see|saw|returns?|returned|gives?|gave|prints?|printed|says?|said|is)"
    r"[ \t]+[`'\"*]*(?P<value>true|false|ture|flase|fasle)\b",
    re.IGNORECASE,
)


def _answer_in_next_line(lines: list[Line], line: Line, env: Environment) -> None:
    """A call alone on its line, and the reporter's words for its answer on the next ("i get false"), or ending the
    line before it ("the following returns false" / "`torch.cuda.is_available()`")."""
    if not _CALL_ALONE.match(line.text):
        return
    said = _ANSWER_SAID.match(lines[line.index + 1].text) if line.index + 1 < len(lines) else None
    before = next((b for b in reversed(lines[max(0, line.index - 2) : line.index]) if b.text.strip()), None)
    said = said or (_ANSWER_BEFORE.search(before.text) if before is not None else None)
    if said is not None:
        fail_wins(env.torch, "is_available", _bool(said.group("value")))


def _printed_label(lines: list[Line], line: Line, env: Environment) -> None:
    """ "CUDA AVAILABLE:" followed by "True" on the next line (a script's own print)."""
    if _PRINT_LABEL.match(line.text):
        for follower in lines[line.index + 1 : line.index + 3]:
            if (flag := _bool(follower.text.strip())) is not None:
                fail_wins(env.torch, "is_available", flag)
                return


def _labelled_print(line: Line, env: Environment) -> None:
    """ "torch version: 2.2.1", "CUDA available: Flase", "cuda version: None", "Number of GPUs: 0": one value per line.
    "cuda version" is read only when it is None (a print of torch.version.cuda): a number after it may be the
    toolkit's or the driver's (nvidia-smi -q prints "CUDA Version : 12.2")."""
    match = _LABELLED.match(line.text) if len(line.text) < 120 else None
    if match is None:
        return
    value, t = match.group("value"), env.torch
    if match.group("version") and (v := version(value)) and value[:1].isdigit():
        first(t, "version", v)
        fail_wins(t, "installed", True)
    elif match.group("avail") and (flag := _bool(value)) is not None:
        fail_wins(t, "is_available", flag)
    elif match.group("cuda") and value == "None":
        first(t, "cpu_build_evidence", line.text.strip())
    elif match.group("cuda") and match.group("cuda").lower() == "torch.version.cuda":
        first(t, "cuda_version", version(value))
    elif match.group("cuda") and value[:1].isdigit():
        # "CUDA: 11.3" in a set-up list: the CUDA the reporter has (toolkit or driver), not the build's
        first(env.host, "cuda_toolkit_version", version(value))
    elif match.group("count") and (count := small_int(value, 4096)) is not None:
        first(t, "device_count", count)


def prose_version(paste: Paste, env: Environment) -> None:
    """The torch version a reporter names in prose, where nothing else in the paste gave one."""
    if env.torch.version is not None:
        return
    named: list[str] = []
    for line in paste.containing("torch"):
        match = _PROSE_VERSION.search(line.text)
        said = version(re.sub(r"[ \t]", "", match.group(1))) if match else None
        if said and _released(said) and said not in named:
            named.append(said)
    # A build's tagged version said without "torch" before it ("the latest nightly 2.8.0.dev20250327+xpu") is a second
    # build named too: with two (one that works, one that fails), which one this report's answers are is not known.
    tagged = {m.group(1) for line in paste.containing("+") for m in _TAGGED_VERSION.finditer(line.text)}
    if named and len({n.split("+")[0] for n in (*named, *tagged) if _released(n)}) == 1:
        env.torch.version = named[0]


def _released(said: str) -> bool:
    """A torch version that exists (or may soon): 0.1 to 0.4, 1.x to 3.x. "pytorch 0.13" in prose is torchaudio's, or
    a typo."""
    parts = re.findall(r"[0-9]+", said)[:2]
    major, minor = (int(p) for p in [*parts, "0"][:2])
    return (major == 0 and 1 <= minor <= 4) or 1 <= major <= 3


def _bool(text: str) -> bool | None:
    word = text.strip().strip("`'\"*").lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    return None


def _library_used_before(text: str, torch_at: int) -> str | None:
    before = text[: max(torch_at, 0)]
    for lib in _OTHER_GPU_LIBS:
        if re.search(rf"\b{lib}\.\w+", before):
            return lib
    return None
