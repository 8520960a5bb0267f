"""A seeded mutational fuzzer over pasted env texts: the real reports of tests/data/envs, cut, spliced and poisoned.

`env_fuzz_cases(seed, count)` yields (name, text) pairs; the same seed gives the same cases. Used by
tests/env/test_env_fuzz.py and, for long runs over every input kind, by bench/fuzz.py:

    sys.path.insert(0, "tests/env"); from env_fuzz import env_fuzz_cases, check_env_case
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

from env_corpus import OWN_DIR, pasted_text

from gputriage.errors import InputError

_CONTROLS = (0x1B, 0x07, 0x08, 0x0D, 0x85, 0x2028, 0xFFFD)
_MAX_CHARS = 4 << 20  # mutations compound; the CLI refuses 16 MiB, and 4 MiB keeps a case under a second
# Values people (and attackers) put where a number or version goes.
_POISON = (
    "2.²",
    "9" * 5000,
    "-1",
    "nan",
    "1e999999",
    "٣.٤",
    "0x7fffffffffffffff",
    "1" * 40 + "." + "2" * 40,
    "\x1b]0;evil\x07\x1b[2J",
    "\u202e\u0000",
    "",
)
_LINES = (
    "CUDA used to build PyTorch: {}",
    "PyTorch version: {}",
    "Nvidia driver version: {}",
    "GPU {}: NVIDIA GeForce RTX 4090",
    "torch.cuda.device_count()\n{}",
    ">>> torch.cuda.is_available()\n{}",
    "|   {}  NVIDIA A100-SXM4-80GB   On  | 00000000:07:00.0 Off |",
    "Driver Version: {}  CUDA Version: {}",
    "CUDA_VISIBLE_DEVICES={} python train.py",
    "RuntimeError: The NVIDIA driver on your system is too old (found version {}).",
    "Error {}: forward compatibility was attempted on non supported HW",
    "Successfully installed torch-{}",
    "Found GPU{} GeForce GTX 770 which is of cuda capability {}.{}.",
)


def seed_texts() -> list[tuple[str, str]]:
    return [(path.name, pasted_text(path)) for path in sorted(OWN_DIR.glob("*.txt"))]


def _poisoned_line(rng: random.Random) -> str:
    template = rng.choice(_LINES)
    return template.format(*(rng.choice(_POISON) for _ in range(template.count("{}"))))


def _mutate(text: str, rng: random.Random, donors: list[str]) -> str:
    lines = text.splitlines() or [""]
    op = rng.randrange(10)
    at = rng.randrange(len(lines))
    if op == 0:  # cut anywhere
        return text[: rng.randrange(len(text) + 1)]
    if op == 1:  # splice another report in
        donor = rng.choice(donors).splitlines() or [""]
        lines[at:at] = donor[rng.randrange(len(donor)) :][: rng.randrange(1, 40)]
    elif op == 2:  # a poisoned value
        lines.insert(at, _poisoned_line(rng))
    elif op == 3:  # duplicate a line many times
        lines[at:at] = [lines[at]] * rng.randrange(2, 400)
    elif op == 4:  # a very long line
        lines.insert(at, rng.choice(lines) * rng.randrange(50, 2000))
    elif op == 5:  # a burst of blank lines
        lines[at:at] = [""] * rng.randrange(100, 20000)
    elif op == 6:  # control characters and odd unicode in a line
        lines[at] = lines[at] + "".join(
            chr(rng.choice((0x1B, 0x07, 0x08, 0x0D, 0x85, 0x2028, 0xFFFD))) for _ in range(8)
        )
    elif op == 7:  # flip characters
        chars = list(text)
        for _ in range(rng.randrange(1, 40)):
            if chars:
                chars[rng.randrange(len(chars))] = chr(rng.randrange(32, 0x2FF))
        return "".join(chars)
    elif op == 8:  # a repeated prefix (the shape that makes `^\s*...` patterns quadratic)
        lines.insert(at, (rng.choice(("GPU 0: ", "CUDA ", ">>> ", "| ", "torch.cuda.")) * rng.randrange(50, 3000)))
    else:  # drop lines
        del lines[at : at + rng.randrange(1, 20)]
    return "\n".join(lines)


def env_fuzz_cases(seed: int, count: int) -> Iterator[tuple[str, str]]:
    """`count` mutated reports; each is 1-3 mutations of a real report of tests/data/envs."""
    rng = random.Random(seed)
    seeds = seed_texts()
    donors = [text for _, text in seeds]
    for i in range(count):
        name, text = rng.choice(seeds)
        for _ in range(rng.randrange(1, 4)):
            text = _mutate(text, rng, donors)[:_MAX_CHARS]
        yield f"{seed}-{i}-{name}", text


def check_env_case(text: str, render: Callable[[object], None] | None = None) -> str:
    """Parse and diagnose one text; "input-error" or "ok". Anything else raised is a bug (the fuzzers count them)."""
    from gputriage.commands.env import diagnose_text

    try:
        diag = diagnose_text(text)
    except InputError as exc:
        message = str(exc)
        assert "\n" not in message, "an input error is one line"
        return "input-error"
    if render is not None:
        render(diag)
    return "ok"


__all__ = ["check_env_case", "env_fuzz_cases", "seed_texts"]
