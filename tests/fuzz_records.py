"""Hostile rank records and report.json documents, generated from the project's own test records, and the one way to
run one through `gputriage report`.

Two input kinds:
- `rank_record_cases(seed, n)`: the bytes of one rank record of a 4-rank job; `run_case("rank", ...)` puts them in
  its place (`ranks/rank-0000R.json`) next to the other three ranks, unchanged, and runs `gputriage report DIR`;
- `report_json_cases(seed, n)`: the bytes of a saved report.json; `run_case("report", ...)` runs
  `gputriage report report.json --md report.md`.

Each case is a real record (tests/report/report_records.py, tests/distributed/dist_records.py) changed by one to
three seeded mutations: a field replaced by a hostile value (int64 overflow, a 5,000-digit number, `1e999`, `NaN`,
a terminal escape, a malformed device, 100,000-deep nesting, a wrong type), a key deleted or renamed, a list
repeated, or the bytes themselves flipped, cut, spliced or repeated. The same seed gives the same cases.

`run_case` says what happened: "ok" (exit 0), "left out" (exit 0, the bad rank file named in one line, the others
merged) or "refused" (exit 2, one line) are the only good outcomes; anything else, an escape character in the terminal
text or the Markdown included, is a failure with its reason.
`bench/fuzz_records.py` runs 10,000 cases per kind; the tests run a few hundred.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

_TESTS = Path(__file__).resolve().parent
for _folder in (_TESTS / "report", _TESTS / "distributed"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))

from dist_records import steps_with  # noqa: E402
from report_records import (  # noqa: E402
    crashed_run,
    distributed_run,
    environment,
    injected_run,
    lifelike_run,
    no_gpu_run,
    starved_run,
    trace_only_run,
)

from gputriage.cli import main  # noqa: E402
from gputriage.commands.rank_report import write_rank_record  # noqa: E402
from gputriage.diagnosis import diagnose  # noqa: E402
from gputriage.record import Run  # noqa: E402
from gputriage.record.environment import Environment  # noqa: E402
from gputriage.record.merge import rank_run  # noqa: E402
from gputriage.record.ranks import RankInfo  # noqa: E402
from gputriage.record.steps import StepsSection  # noqa: E402
from gputriage.report.document import build_document, encode_document  # noqa: E402

Case = tuple[str, bytes]  # what was done to the record, and the bytes
KINDS = ("rank", "report")
WORLD_SIZE = 4

# --- the records to start from ------------------------------------------------------------------------------------


@cache
def rank_record_seeds() -> tuple[tuple[bytes, ...], ...]:
    """Each job is the bytes of its WORLD_SIZE rank records, as `gputriage run` writes them under torchrun."""
    return tuple(_job_records(job) for job in (_report_records_job(), _dist_records_job()))


@cache
def report_json_seeds() -> tuple[bytes, ...]:
    """report.json documents as `--out` writes them, for records of every kind the report tests render."""
    runs = [
        starved_run(),
        lifelike_run(step_count=60),
        crashed_run(),
        no_gpu_run(),
        distributed_run(),
        trace_only_run(partition=True),
        injected_run(),
    ]
    for run in runs[:3]:
        run.environment = full_environment()
        run.expect_device = "cuda:0"
    return tuple(encode_document(build_document(diagnose(run))) for run in runs)


def _report_records_job() -> list[Run]:
    merged = distributed_run(world_size=WORLD_SIZE)
    assert merged.ranks is not None
    runs = [rank_run(merged, info) for info in merged.ranks.ranks]
    for run in runs:  # the rank's own record keeps its sections at the top level, not in rank_info
        assert run.rank_info is not None
        run.rank_info = _bare(run.rank_info)
        run.environment = full_environment()
    return runs


def full_environment() -> Environment:
    """The report tests' environment with every fact a probe fills, so that each is a field a mutation can hit."""
    env = environment()
    env.torch.device_count = 1
    env.torch.arch_list = ["sm_70", "sm_80", "sm_90"]
    env.torch.min_capability = "3.7"
    env.torch.install_method = "pip"
    env.driver.cuda_driver_version = "12.4"
    env.driver.devices[0].compute_capability = "8.0"
    env.driver.devices[0].uuid = "GPU-2c3e4f5a-0000-1111-2222-333344445555"
    env.driver.devices[0].pci_bus_id = "00000000:07:00.0"
    env.host.os_name = "linux"
    env.host.dev_nodes = ["/dev/nvidia0", "/dev/nvidiactl"]
    env.host.pci_nvidia_devices = 1
    env.host.proc_driver_version = "550.54.15"
    env.env_vars = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return env


def _dist_records_job() -> list[Run]:
    runs = []
    for rank in range(WORLD_SIZE):
        steps, stats = steps_with(0.1, 0.02, 0.001) if rank == 2 else steps_with(0.002, 0.02, 0.1)
        run = Run(command="run", argv=["train.py"], expect_device="cuda")
        run.rank_info = RankInfo(
            rank=rank,
            world_size=WORLD_SIZE,
            local_rank=rank,
            node="node-a",
            job_id="job-1",
            backend="nccl",
            device=f"cuda:{rank}",
            collectives=stats,
        )
        run.steps = StepsSection(steps=steps)
        runs.append(run)
    return runs


def _bare(info: RankInfo) -> RankInfo:
    bare = msgspec.structs.replace(info)
    for name in ("environment", "process", "placement", "compute", "steps", "gpu", "trace"):
        setattr(bare, name, None)
    return bare


def _job_records(runs: list[Run]) -> tuple[bytes, ...]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = [write_rank_record(run, Path(tmp)) for run in runs]
        return tuple(path.read_bytes() for path in paths)


# --- hostile values ---------------------------------------------------------------------------------------------------
# A value that JSON can hold but Python's json cannot write (1e999, NaN, a 5,000-digit number) is put in as a marker
# string and swapped for its raw token after encoding.
_RAW = "\u0000raw:"


def _raw(token: str) -> str:
    return f"{_RAW}{token}\u0000"


def _deep(depth: int, inner: str = "[", outer: str = "]") -> str:
    return _raw(inner * depth + outer * depth)


ESCAPES = (
    "aten::copy_\x1b]0;evil\x07\x1b[2J",
    "\x1b[31mred\x1b[0m",
    "\x9b2J",
    "nul\x00byte",
    "bidi \u202eexe.txt",
    "cr\roverwrite",
    "</script><img src=x onerror=alert(1)>",
    "`` | ** [x](javascript:alert(1))",
)
HOSTILE_VALUES: tuple[object, ...] = (
    2**63,
    -(2**63) - 1,
    10**30,
    _raw("1" + "0" * 5000),
    _raw("-" + "9" * 5000),
    _raw("1e999"),
    _raw("-1e999"),
    _raw("NaN"),
    _raw("Infinity"),
    _raw("1e-999"),
    1e308,
    -1e308,
    5e-324,
    -0.0,
    -1,
    0,
    1_000_000_000,
    2**62,
    "cuda:abc",
    "cuda:",
    "cuda:1:2",
    "cuda:-1",
    "cuda:99999999999",
    "nan",
    "²",
    "2.²",
    "",
    "9" * 5000,
    "x" * 100_000,
    *ESCAPES,
    None,
    True,
    False,
    [],
    {},
    [None],
    {"": None},
    _deep(100_000),
    _deep(100_000, '{"a":', "}"),
    _deep(50),
)


HOSTILE_TEXT: tuple[str, ...] = (
    *(v for v in HOSTILE_VALUES if isinstance(v, str) and not v.startswith(_RAW)),
    "-1",
    "-0",
    "1e999",
    "NaN",
    "GPU-",
    "MIG-GPU-x/1/2",
    "0,0,-1",
    ",,,",
    " ",
    "\n",
    "١٢",  # Arabic-Indic digits: str.isdigit() says yes, int() says yes, CUDA says no
)
HOSTILE_NUMBERS: tuple[object, ...] = tuple(
    v for v in HOSTILE_VALUES if type(v) in (int, float) or (isinstance(v, str) and v.startswith(_RAW) and "[" not in v)
)


def hostile_value(rng: random.Random, like: object = None) -> object:
    """A hostile value; most often one of the same JSON type as `like`, so that it passes the type check and reaches
    the code behind it."""
    if rng.random() < 0.7:
        if isinstance(like, str):
            return rng.choice(HOSTILE_TEXT)
        if type(like) in (int, float):
            return rng.choice(HOSTILE_NUMBERS)
    return rng.choice(HOSTILE_VALUES)


# --- mutations --------------------------------------------------------------------------------------------------------
Json = Any
REPEAT_MAX_BYTES = 2 << 20
Slot = tuple[Any, Any]  # (container, key or index)


def _slots(doc: Json) -> list[Slot]:
    """Every (container, key) of the tree, iteratively; long lists contribute their first entries only."""
    slots: list[Slot] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                slots.append((node, key))
                stack.append(value)
        elif isinstance(node, list):
            for index, value in enumerate(node[:8]):
                slots.append((node, index))
                stack.append(value)
    return slots


def _replace_value(doc: Json, rng: random.Random) -> str:
    slots = _slots(doc)
    if not slots:
        return "none"
    node, key = rng.choice(slots)
    value = hostile_value(rng, node[key])
    node[key] = value
    return f"set {_label(key)} = {_label(value)}"


def _drop_key(doc: Json, rng: random.Random) -> str:
    """A key deleted, or renamed (an unknown key, with terminal escapes in its name, where the field was)."""
    slots = [(n, k) for n, k in _slots(doc) if isinstance(n, dict)]
    if not slots:
        return "none"
    node, key = rng.choice(slots)
    value = node.pop(key)
    if rng.random() < 0.5:
        return f"delete {_label(key)}"
    node[rng.choice(ESCAPES) + str(key)] = value
    return f"rename {_label(key)}"


def _repeat_list(doc: Json, rng: random.Random) -> str:
    lists = [n for n, _ in _slots(doc) if isinstance(n, list) and n]
    if not lists:
        return "none"
    node = rng.choice(lists)
    # At most REPEAT_MAX_BYTES more JSON per mutation: the memory a huge record costs is measured on its own
    # (docs/report.md); here a case must stay small enough that generating it is not what takes the memory.
    item_bytes = max(1, len(json.dumps(node[0])))
    times = min(rng.choice((1, 3, 50)), max(1, REPEAT_MAX_BYTES // (item_bytes * len(node))))
    node.extend(node * times)
    return f"repeat a list of {len(node)}"


def _swap_values(doc: Json, rng: random.Random) -> str:
    slots = _slots(doc)
    if len(slots) < 2:
        return "none"
    (a, ka), (b, kb) = rng.sample(slots, 2)
    try:
        a[ka], b[kb] = b[kb], a[ka]
    except (KeyError, IndexError):  # one slot was inside the other
        return "none"
    return f"swap {_label(ka)} and {_label(kb)}"


_TREE_MUTATIONS: tuple[Callable[[Json, random.Random], str], ...] = (
    _replace_value,
    _replace_value,
    _replace_value,
    _drop_key,
    _drop_key,
    _repeat_list,
    _swap_values,
)


def _encode(doc: Json) -> bytes:
    text = json.dumps(doc, ensure_ascii=False)
    while (start := text.find('"\\u0000raw:')) != -1:
        end = text.index('\\u0000"', start)
        text = text[:start] + text[start + len('"\\u0000raw:') : end] + text[end + len('\\u0000"') :]
    return text.encode("utf-8", "surrogatepass")


def _byte_mutation(data: bytes, rng: random.Random, donors: tuple[bytes, ...]) -> tuple[str, bytes]:
    size = len(data)
    at = rng.randrange(size) if size else 0
    choice = rng.randrange(6)
    if choice == 0:
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            spot = rng.randrange(size)
            flipped[spot] ^= 1 << rng.randrange(8)
        return "flip bits", bytes(flipped)
    if choice == 1:
        return f"cut at {at}", data[:at]
    if choice == 2:
        return f"insert at {at}", data[:at] + rng.randbytes(rng.randint(1, 64)) + data[at:]
    if choice == 3:
        end = min(size, at + rng.randint(1, 4096))
        return f"delete {at}:{end}", data[:at] + data[end:]
    if choice == 4:
        donor = rng.choice(donors)
        cut = rng.randrange(len(donor))
        return f"splice at {at}", data[:at] + donor[cut:]
    end = min(size, at + rng.randint(1, 256))
    return f"repeat {at}:{end}", data[:at] + data[at:end] * rng.randint(2, 200) + data[end:]


def mutate(data: bytes, rng: random.Random, donors: tuple[bytes, ...]) -> Case:
    """One to three mutations of a record's bytes: mostly on its JSON tree, sometimes on the bytes."""
    if rng.random() < 0.2:
        return _byte_mutation(data, rng, donors)
    doc = json.loads(data)
    done = [rng.choice(_TREE_MUTATIONS)(doc, rng) for _ in range(rng.choice((1, 1, 2, 3)))]
    return "; ".join(done), _encode(doc)


def rank_record_cases(seed: int, n: int) -> Iterator[Case]:
    """`n` hostile versions of rank 1's record, reproducible from `seed`. The label starts with the job ("job 0: ")
    whose other ranks, unchanged, go next to it."""
    rng = random.Random(seed)
    jobs = rank_record_seeds()
    donors = tuple(record for job in jobs for record in job)
    for _ in range(n):
        job, rank = rng.randrange(len(jobs)), rng.randrange(WORLD_SIZE)
        label, data = mutate(jobs[job][rank], rng, donors)
        yield f"job {job} rank {rank}: {label}", data


def report_json_cases(seed: int, n: int) -> Iterator[Case]:
    """`n` hostile report.json documents, reproducible from `seed`."""
    rng = random.Random(seed)
    seeds = report_json_seeds()
    for _ in range(n):
        yield mutate(rng.choice(seeds), rng, seeds)


def cases(kind: str, seed: int, n: int) -> Iterator[Case]:
    return rank_record_cases(seed, n) if kind == "rank" else report_json_cases(seed, n)


# --- running one case -------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    status: str  # ok | left out | refused | traceback | memory | unclean (exit code, stderr or a text not as promised)
    detail: str = ""  # the traceback's last frame, or what was unclean


def run_case(kind: str, case: Case, workdir: Path) -> Outcome:
    """Run `gputriage report` in this process on one case, written under `workdir` (emptied first)."""
    target = _write_case(kind, case, workdir)
    md = workdir / "out.md"
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            code = main(["report", str(target), "--md", str(md)])
    except MemoryError:
        return Outcome("memory", "MemoryError")
    except Exception as exc:  # what the CLI let through: a traceback the user would see
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        return Outcome("traceback", f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: {exc!s:.200}")
    return _judge(code, stdout.getvalue(), stderr.getvalue(), md)


def _write_case(kind: str, case: Case, workdir: Path) -> Path:
    label, data = case
    for old in sorted(workdir.rglob("*"), reverse=True):
        old.rmdir() if old.is_dir() else old.unlink()
    if kind == "report":
        target = workdir / "report.json"
        target.write_bytes(data)
        return target
    ranks = workdir / "job" / "ranks"
    ranks.mkdir(parents=True)
    job_text, rank_text = label.removeprefix("job ").split(":", 1)[0].split(" rank ")
    mutated = int(rank_text)
    for rank, record in enumerate(rank_record_seeds()[int(job_text)]):
        (ranks / f"rank-{rank:05d}.json").write_bytes(data if rank == mutated else record)
    return workdir / "job"


def _judge(code: int, out: str, err: str, md: Path) -> Outcome:
    if code == 2:
        return _judge_refusal(err)
    if code != 0:
        return Outcome("unclean", f"exit {code}")
    for name, text in (("terminal", out), ("stderr", err), ("report.md", md.read_text("utf-8", "replace"))):
        if _unsafe(text):
            return Outcome("unclean", f"control character in {name}")
    notes = err.splitlines()
    if not notes:
        return Outcome("ok")
    if (len(notes) == 1 and notes[0].startswith("gputriage: left out of the merged report: ")) or _other_job(notes):
        return Outcome("left out", notes[0])  # the bad rank file is named; the others make the report
    return Outcome("unclean", f"exit 0 with stderr {err[:300]!r}")


def _other_job(notes: list[str]) -> bool:
    """A mutated job id makes a rank another job's: it is left out of the merge, named in one line."""
    return len(notes) == 1 and "rank record(s) of another job" in notes[0]


def _judge_refusal(err: str) -> Outcome:
    lines = err.splitlines()
    if len(lines) != 1 or not lines[0].startswith("gputriage: error: "):
        return Outcome("unclean", f"exit 2 with stderr {err[:300]!r}")
    if _unsafe(err):
        return Outcome("unclean", f"control character in the error line {err[:300]!r}")
    return Outcome("refused", lines[0])


def _unsafe(text: str) -> bool:
    """A character a terminal would act on. rich writes no style codes into a file, so any ESC is the input's."""
    return any(ch not in "\n\t" and (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F) for ch in text)


def _label(value: object) -> str:
    text = repr(value) if not isinstance(value, str) or not value.startswith(_RAW) else value[len(_RAW) : -1]
    return text if len(text) <= 40 else f"{text[:30]}...({len(text)} chars)"
