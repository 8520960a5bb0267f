"""The paste as lines, each marked as what the user's machine printed or said (a fact) or text about a command.

People paste their own output mixed with replies that suggest commands ("try pip install torch==1.10.1+cu102"),
Dockerfile lines and fixes applied later. Only facts decide a cause. A paragraph is a suggestion when its prose cues
one (try, you should, the fix, what worked, ...) and does not speak of the user's own state (I ran, I installed, the
script has ...); the code block or command paragraph right after a suggesting paragraph belongs to it. Markdown quote
markers, code fences and logger prefixes (docker compose `name_1 |`, CI timestamps, `[rank0]:`) are removed first so
the same extractors read them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from gputriage.collectors.env_text.limits import MATCH_CHARS, MAX_LINES

_PREFIXES = re.compile(
    r"^(?:[ \t]*>)+[ \t]?"  # markdown quotes
    r"|^[\w.-]{1,80}[_-][0-9]{1,3}[ \t]+\|[ \t]"  # docker compose service prefix
    r"|^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{5,20}Z[ \t]"  # CI log timestamps
    r"|^\[rank[0-9]{1,5}\]:[ \t]?"  # torchrun rank prefixes
)
_PROMPT = re.compile(
    r"^(?:\([\w.-]{1,40}\)[ \t]*)?"  # a conda / venv name
    r"(?:[\w.-]{1,40}@[\w.-]{1,64}:[^ \t$#]{0,120}[$#]|[$❯%]|PS [A-Za-z]:\\[^>]{0,120}>|[A-Za-z]:\\[^>]{0,120}>)"
    r"[ \t]?"
)
_WINDOWS_PROMPT = re.compile(r"^(?:\([\w.-]{1,40}\)[ \t]*)?(?:PS )?[A-Za-z]:\\[^>]{0,120}>")
_REPL = re.compile(r"^[A-Za-z]?(?:>>>|\.\.\.)[ \t]?|^In \[[0-9]{1,5}\]:[ \t]?")
_WORD = re.compile(r"[A-Za-z']{2,}")
_FENCE = re.compile(r"^[ \t]*(?:```|~~~)")
# A fenced block on one line ("```pip3 install ... cu128```"): its own code paragraph, no toggle of the fence
_ONE_LINE_FENCE = re.compile(r"^[ \t]*(```|~~~)(?!\s*$).*\1[ \t]*$")


def _toggles_fence(text: str) -> bool:
    return bool(_FENCE.match(text)) and not _ONE_LINE_FENCE.match(text)


_SUGGEST = re.compile(
    r"\b(?:try(?:ing)?(?![ \t]+as[ \t]+(?:i|we)[ \t]+might)|"  # "try as I might": the reporter's own attempts
    r"you (?:should|need|can|could|may|might|must|have to|'d)|please (?:run|try|use|install|set|"
    r"check|update|upgrade|reinstall|remove)|instead|workaround|solution|"
    r"fix(?:es|ed)?(?: it| this| for me| by| with|:)|"
    r"the fix|to fix|recommend|suggest|what (?:worked|fixed)|works? for me|that (?:fixed|worked)|"
    r"(?<!you )do this|run this|"  # "if you do this on a system ..." describes, it does not suggest
    r"use this|put this|add this|do the following|(?:following|below) command|maybe|consider|make sure|"
    r"check that|verify|validate|if you want|one option|alternatively|reinstall|re-install|downgrad|have to build|"
    r"install (?:a|the|pytorch|torch) |solved|now works|works now|it works)\b",
    re.IGNORECASE,
)
# The user's own state: what they ran, installed, have, or what their script contains (also in a fix's sentence).
_OWN = re.compile(
    r"\b(?:i (?:[a-z]{2,12}ly[ \t]+)?"  # "I successfully installed"
    r"(?:ran|run|used|use|installed|install|did|executed|typed|get|got|have|had|tried|try|am trying|'m trying|"
    r"am running|'m running)|"
    r"installed (?:with|via|using|by|from)|i've (?:installed|tried)|my (?:command|install|setup|script)|"
    r"here is|this is (?:the|my|what)|when (?:i|running)|(?:remove|removing|delete|deleting|comment(?:ed|ing)? out|"
    r"change|changing|replace|replacing|drop) (?:the |this |that )?(?:line|\"|'|`|os\.environ|export|set )|"
    r"(?:script|notebook|file|\.py|\.sh|\.bat) (?:had|has|sets|contains)|in the (?:bash |shell )?script|"
    r"unless the line)\b",
    re.IGNORECASE,
)
# What tools print, even when it reads like advice ("Please update your GPU driver", "Make sure that the latest NVIDIA
# driver is installed", "try setting max_split_size_mb"): never a suggestion cue.
_MACHINE = re.compile(
    r"(?:error|warning|exception|fail(?:ed|ure)?)\b[:\] ]|^[\w.]*(?:error|warning)\b|triggered internally|"
    r"nvidia-smi has failed|please update your (?:gpu )?driver|alternatively, go to|compiled with your version|"
    r"if you want to use the .{1,80} gpu with pytorch|please check the instructions|make sure that the latest nvidia|"
    r"try setting max_split_size_mb|documentation for memory management|cuda_launch_blocking|^hint:|"
    r"please check that you have an nvidia gpu|set \"accelerator\" and \"devices\"|is nvidia-modprobe installed|"
    # torch's own arch warning, word for word: its "Please install PyTorch with a following CUDA" is no one's advice
    r"is not compatible with the current pytorch installation|the current pytorch install supports cuda|"
    r"please install pytorch with a following cuda|minimum and maximum cuda capability supported|"
    r"which is of cuda capability [0-9]",
    re.IGNORECASE,
)
_MACHINE_WORDS = (
    "error",
    "warn",
    "exception",
    "fail",
    "trigger",
    "driver",
    "compiled",
    "gpu",
    "instructions",
    "max_split",
    "memory",
    "cuda_launch",
    "hint",
    "accelerator",
    "modprobe",
)
_COMMAND = re.compile(
    r"^(?:sudo |!|%)?(?:(?:pip3?|python[0-9.]*[ \t]+-m[ \t]+pip|uv(?:[ \t]+pip)?|poetry|conda|mamba|micromamba)[ \t]+"
    r"(?:install|uninstall|list|show|freeze|add|create|remove|activate|env|sync|run|download)\b|"
    r"python[0-9.]*(?:[ \t]+-[cmuV]\b|[ \t]+\S+\.py\b|[ \t]*$)|(?:docker|nvidia-docker|podman|docker-compose|kubectl)"
    r"[ \t]+\w|(?:export|set|setx)[ \t]+[A-Z_]{2,}|os\.environ|[A-Z_]{3,40}=|(?:apt(?:-get)?|yum|dnf)[ \t]+\w|"
    r"(?:modprobe|rmmod|nvidia-smi|nvcc|git|cd|wget|curl|ln|rm|ls|cat|lspci|lsmod|dmesg)(?:[ \t]|$))"
)


class Line(msgspec.Struct):
    index: int
    text: str  # the line without quote markers / log prefixes / prompt, cut to MATCH_CHARS
    low: str  # text.lower()
    prompt: bool  # typed at a shell or REPL prompt: a command the user ran
    suggested: bool = False  # text about a command or a state after a fix, not the failing machine's state

    @property
    def fact(self) -> bool:
        return not self.suggested


class Paste(msgspec.Struct):
    lines: list[Line]
    # A Windows shell prompt ("C:\Users\me>", "PS C:\>") began a line: the commands ran on Windows.
    windows_prompt: bool = False

    def facts(self) -> Iterator[Line]:
        return (line for line in self.lines if line.fact)

    def containing(self, *needles: str, facts_only: bool = True) -> Iterator[Line]:
        """Lines holding any of the lowercase `needles` (a cheap filter before a pattern)."""
        pool = self.facts() if facts_only else iter(self.lines)
        return (line for line in pool if any(n in line.low for n in needles))

    def window(self, start: int, count: int) -> list[Line]:
        return self.lines[start : start + count]


# pip's "Installing collected packages: a, b, ..., torch, ..." runs to thousands of characters; only torch's family
# on it is a fact here, so the line is read this far and kept as those names.
_COLLECTED_CHARS = 16_384
_COLLECTED = "installing collected packages:"
_TORCH_FAMILY = re.compile(r"(?:^|,)[ \t]*(torch|torchvision|torchaudio|xformers|pytorch)[ \t]*(?=,|$)")


def _collected(raw: str) -> str:
    """ "Installing collected packages: numpy, ..., torch, tqdm" -> "Installing collected packages: torch"."""
    names = _TORCH_FAMILY.findall(raw[len(_COLLECTED) :])
    return "Installing collected packages: " + ", ".join(names) if names else raw[:MATCH_CHARS]


def iter_lines(text: str, limit: int = MAX_LINES, width: int = _COLLECTED_CHARS) -> Iterator[str]:
    """The first `limit` lines, each cut to `width` characters, without building the list of all of them or copying
    a huge line: a paste of 16 Mi newlines, or one 16 MiB line, stays cheap in time and memory."""
    start, count, size = 0, 0, len(text)
    newline = "\n" if "\n" in text else "\r"  # classic Mac OS line endings: CR alone
    while start < size and count < limit:
        end = text.find(newline, start)
        end = size if end < 0 else end
        yield text[start : min(end, start + width)].rstrip("\r")
        start, count = end + 1, count + 1


# Markdown's backslash escapes, as a report copied from an issue's source reads: `torch.\_\_version\_\_`. Outside
# code blocks only: inside one a backslash is the machine's own (a Windows path).
_MARKDOWN_ESCAPE = re.compile(r"\\([_*`#\[\]<>])")


def split_paste(text: str) -> Paste:
    lines: list[Line] = []
    in_fence = windows = False
    for index, raw in enumerate(iter_lines(text)):
        line = raw.rstrip()
        line = _PREFIXES.sub("", line, count=1)
        if line[: len(_COLLECTED)].lower() == _COLLECTED:
            line = _collected(line)
        line = line[: MATCH_CHARS * 2]
        if _toggles_fence(line):
            in_fence = not in_fence
        elif not in_fence and "\\" in line:
            line = _MARKDOWN_ESCAPE.sub(r"\1", line)
        prompt = bool(_PROMPT.match(line) or _REPL.match(line))
        windows = windows or (prompt and bool(_WINDOWS_PROMPT.match(line)))
        body = _REPL.sub("", _PROMPT.sub("", line, count=1), count=1) if prompt else line
        body = body[:MATCH_CHARS]
        lines.append(Line(index, body, body.lower(), prompt))
    _mark_suggestions(lines)
    return Paste(lines, windows_prompt=windows)


_REPLY_MARK = re.compile(r"^[ \t]*-{2,}[ \t]*[\w .]{1,40}?[ \t]*-{2,}[ \t]*$")


def _paragraphs(lines: list[Line]) -> list[list[Line]]:
    """Runs of lines separated by blank lines; a fenced code block is one paragraph whatever it holds."""
    out: list[list[Line]] = []
    current: list[Line] = []
    in_fence = False
    for line in lines:
        if _ONE_LINE_FENCE.match(line.text) and not in_fence:
            if current:
                out.append(current)
            out.append([line])
            current = []
            continue
        if _FENCE.match(line.text):
            if current:
                out.append(current)
            current, in_fence = [], not in_fence
            continue
        if not line.text.strip() and not in_fence:
            if current:
                out.append(current)
            current = []
            continue
        current.append(line)
    if current:
        out.append(current)
    return out


# A bug template's section of what should happen ("## Expected behavior", "**Expected result**"): its output is what
# the reporter wants, not what the machine printed (trial 10: "> False / > 0" under it made a working machine's
# CUDA_VISIBLE_DEVICES the cause). It runs to the next heading.
_HEADING = re.compile(r"^[ \t]*(?:#{1,6}[ \t]|\*\*[^*]{2,60}\*\*[ \t:]*$)")
_EXPECTED_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+|\*\*)[ \t]*expected[ \t]+(?:behaviou?r|results?|output|outcome)", re.IGNORECASE
)
# A sentence that introduces expected output ("gives the expected output:", "The expected output should be:"): the
# output paragraph after it is not the machine's state either.
_EXPECTED_INTRO = re.compile(r"\bexpected (?:out(?:put)?|results?|behaviou?r)\b[^.]{0,40}:[ \t]*$", re.IGNORECASE)


def _mark_expected(lines: list[Line]) -> None:
    inside = False
    for line in lines:
        if _HEADING.match(line.text):
            inside = bool(_EXPECTED_HEADING.match(line.text))
        if inside:
            line.suggested = True


def _mark_suggestions(lines: list[Line]) -> None:
    _mark_expected(lines)
    carry = False  # the previous paragraph suggested something: its code block follows
    for paragraph in _paragraphs(lines):
        if _REPLY_MARK.match(paragraph[0].text):
            carry = False  # "--- reporter ---": another speaker begins; what follows is not the last one's code
        prose = [line for line in paragraph if _is_prose(line)]
        if prose and _EXPECTED_INTRO.search(prose[-1].text):
            carry = True
            continue
        if prose:
            suggests = any(_cues(line) for line in prose) and not any(_OWN.search(line.text) for line in prose)
            if suggests:
                _mark_from_cue(paragraph)
            carry = suggests
            continue
        if carry:  # a command / code paragraph right after a suggesting one
            for line in paragraph:
                line.suggested = True
        carry = False


def _cues(line: Line) -> bool:
    """A suggestion cue; a question that does not address someone ("Is there a workaround?") is not one."""
    if not _SUGGEST.search(line.text) or _MACHINE.search(line.text):
        return False  # a program's own words ("Please install PyTorch with a following CUDA...") suggest nothing
    question = line.text.rstrip().endswith("?")
    return not question or bool(re.search(r"\byou\b", line.low))


def _mark_from_cue(paragraph: list[Line]) -> None:
    """Suggested from the first cue on: a sentence before the cue in the same paragraph is still the user's own."""
    started = False
    for line in paragraph:
        if not started and _is_prose(line) and _cues(line):
            started = True
        if started and not _MACHINE.search(line.text):
            line.suggested = True


def _is_prose(line: Line) -> bool:
    """A sentence someone wrote, as opposed to a command, a prompt line or machine output."""
    text = line.text.strip()
    if line.prompt or not text or text.startswith(("|", "+", "[", "File ", "Traceback")) or _COMMAND.match(text):
        return False
    if _ONE_LINE_FENCE.match(text):
        return False  # a code block on one line: code, whatever its words
    if len(_WORD.findall(text[:200])) < 3:
        return False
    return not (any(w in line.low for w in _MACHINE_WORDS) and _MACHINE.search(text))
