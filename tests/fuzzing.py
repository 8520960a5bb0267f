"""A seeded mutational fuzzer for gputriage's inputs: one generator per input kind, shared by the tests and bench/.

`case(kind, seed, index)` returns the same bytes for the same arguments on every machine, so a failure found by
`bench/fuzz.py --cases 10000` is reproduced by its (kind, seed, index). Seeds are real files from
../shared/corpus when present (never copied into the project) and small synthetic ones otherwise.

Each kind is one entry in KINDS: a function that lists its seed documents, the file suffixes it may take, and the
command that consumes a file. Adding a kind (env texts, rank records, report.json) is one more entry.
"""

from __future__ import annotations

import gzip
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from corpus_path import CORPUS

REPO_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Case:
    kind: str
    seed: int
    index: int
    data: bytes
    suffix: str  # the file name's suffix (".json", ".json.gz", ...)
    mutations: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.seed}:{self.index} ({', '.join(self.mutations) or 'seed'})"


@dataclass(frozen=True)
class Kind:
    seeds: Callable[[], list[bytes]]
    argv: Callable[[Path], list[str]]  # the gputriage command line that reads the file
    gzip_ok: bool = False
    # A kind with its own structure-aware generator: (seed, index) -> (document, what was done to it).
    make: Callable[[int, int], tuple[bytes, tuple[str, ...]]] | None = None


# ---- seeds for traces


_SMALL_TRACES = (  # real traces small enough to fuzz thousands of times (each under ~1.5 MB of JSON)
    "hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "hta/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "hta/critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz",
    "hta/trace_file_list/inference_rank_1.json.gz",
    "hta/trace_filter/sampled_rank-0.json.gz",
    "hta/triton_example/triton_example.json.gz",
    "tracelens/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
)


@cache
def trace_seeds() -> list[bytes]:
    """Real traces from the corpus when it is there, and synthetic ones always."""
    out = [_synthetic_trace(gpu=True), _synthetic_trace(gpu=False)]
    folder = CORPUS / "traces"
    for name in _SMALL_TRACES:
        path = folder / name
        if path.is_file():
            out.append(gzip.decompress(path.read_bytes()))
    return out


def _synthetic_trace(*, gpu: bool) -> bytes:
    sys.path.insert(0, str(Path(__file__).parent / "trace"))
    from builders import TraceBuilder, training_loop

    b: TraceBuilder = training_loop(steps=4, loader_us=1500, sync_idle_us=600) if gpu else TraceBuilder()
    if not gpu:
        for i in range(4):
            b.step(i, i * 5000.0, 5000.0)
            b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", i * 5000.0, 2000.0)
            b.op("aten::addmm", i * 5000.0 + 2500, 2000.0)
    b.meta["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1}
    import json

    text = json.dumps({**b.meta, "traceEvents": b.events})
    return re.sub(r'"@ns:(\d+)"', lambda m: f"{int(m.group(1)) // 1000}.{int(m.group(1)) % 1000:03d}", text).encode()


def _env_case(seed: int, index: int) -> tuple[bytes, tuple[str, ...]]:
    """One mutated real report from tests/data/envs (tests/env/env_fuzz.py's structure-aware mutations)."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "env"))  # env_fuzz and the corpus reader it imports live there
    from env_fuzz import env_fuzz_cases

    name, text = next(env_fuzz_cases(seed * 1_000_003 + index, 1))
    return text.encode("utf-8", "surrogateescape"), (name,)


KINDS: dict[str, Kind] = {
    "trace": Kind(seeds=trace_seeds, argv=lambda path: ["trace", str(path), "--json"], gzip_ok=True),
    "env": Kind(seeds=list, argv=lambda path: ["env", "--from", str(path), "--json"], make=_env_case),
}


# ---- mutations (each takes the document and a random source, and returns new bytes)

_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.){0,200}"')
_HOSTILE_NUMBERS = (
    b"1e999999", b"NaN", b"Infinity", b"-Infinity", b"-1", b"9" * 5000, b"18446744073709551616",
    b"-9223372036854775809", b"0.0000001", b"1.5e3", b"-0", b"2e-400", b'"12.5"', b"true", b"null",
)  # fmt: skip
_HOSTILE_STRINGS = (
    b'"aten::copy_\\u001b]0;evil\\u0007\\u001b[2J"',
    b'"\\ud800"',
    b'"' + b"x" * 100_000 + b'"',
    b'"}, {\\"ph\\": \\"X\\", \\"cat\\": \\"kernel\\"}"',
    b'"' + b"{}, " * 2000 + b'"',
    b'"\xff\xfe\xc3"',
    b'"ProfilerStep#1"',
    b'"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"',
    b'"ncclDevKernel_AllReduce"',
    b'"Memcpy DtoH (Device -> Pageable)"',
    b'"cudaStreamSynchronize"',
    b'"train.py(42): step"',
    b'"kernel"',
    b'"cpu_op"',
    b'"python_function"',
    b'""',
    b"[]",
    b"{}",
    b"null",
    b"[" * 5000 + b"]" * 5000,
)


def _flip(doc: bytes, rng: random.Random) -> bytes:
    out = bytearray(doc)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def _delete(doc: bytes, rng: random.Random) -> bytes:
    if not doc:
        return doc
    start = rng.randrange(len(doc))
    return doc[:start] + doc[start + rng.randint(1, 4096) :]


def _duplicate(doc: bytes, rng: random.Random) -> bytes:
    if not doc:
        return doc
    start = rng.randrange(len(doc))
    piece = doc[start : start + rng.randint(1, 20_000)]
    at = rng.randrange(len(doc))
    return doc[:at] + piece * rng.randint(1, 3) + doc[at:]


def _truncate(doc: bytes, rng: random.Random) -> bytes:
    return doc[: rng.randrange(len(doc) + 1)]


def _replace_token(pattern: re.Pattern[bytes], values: tuple[bytes, ...]) -> Callable[[bytes, random.Random], bytes]:
    def mutate(doc: bytes, rng: random.Random) -> bytes:
        for _ in range(rng.randint(1, 5)):
            start = rng.randrange(len(doc) + 1)
            found = pattern.search(doc, start) or pattern.search(doc)
            if found is None:
                return doc
            doc = doc[: found.start()] + rng.choice(values) + doc[found.end() :]
        return doc

    return mutate


def _nest(doc: bytes, rng: random.Random) -> bytes:
    """A value deep enough to break recursive parsers, in the header, an event's args, or the tail."""
    depth = rng.choice((100, 1000, 100_000))
    deep = b"[" * depth + b"]" * depth
    spot = rng.choice((b'"args": {', b'"traceEvents": [', b"{"))
    at = doc.find(spot, rng.randrange(len(doc) + 1))
    if at < 0:
        at = doc.find(spot)
    if at < 0:
        return deep
    if spot == b'"traceEvents": [':  # a key before the list: the header
        return doc[:at] + b'"deep": ' + deep + b", " + doc[at:]
    return doc[: at + len(spot)] + b'"deep": ' + deep + b", " + doc[at + len(spot) :]


def _swap_keys(doc: bytes, rng: random.Random) -> bytes:
    pairs = ((b'"ts"', b'"dur"'), (b'"cat"', b'"name"'), (b'"stream"', b'"correlation"'), (b'"ph": "X"', b'"ph": "B"'))
    a, b = rng.choice(pairs)
    return doc.replace(a, b"\x00").replace(b, a).replace(b"\x00", b)


def _junk_prefix(doc: bytes, rng: random.Random) -> bytes:
    return rng.choice((b"\xef\xbb\xbf", b" \n\t", b"SQLite format 3\x00", b"\x1f\x8b", b"[", b"{")) + doc


_MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "flip": _flip,
    "delete": _delete,
    "duplicate": _duplicate,
    "truncate": _truncate,
    "number": _replace_token(_NUMBER, _HOSTILE_NUMBERS),
    "string": _replace_token(_STRING, _HOSTILE_STRINGS),
    "nest": _nest,
    "swap": _swap_keys,
    "prefix": _junk_prefix,
}
# Structure-aware mutations keep most of a trace readable, so they reach deeper than random bytes: weigh them up.
_WEIGHTS = {
    "flip": 1, "delete": 1, "duplicate": 1, "truncate": 1, "number": 4, "string": 4, "nest": 1, "swap": 1, "prefix": 1,
}  # fmt: skip


def case(kind: str, seed: int, index: int) -> Case:
    """The index-th fuzz case of a kind: a seed document with 1-3 mutations, maybe gzipped."""
    spec = KINDS[kind]
    if spec.make is not None:
        data, done = spec.make(seed, index)
        return Case(kind, seed, index, data, ".txt", done)
    rng = random.Random(f"{kind}:{seed}:{index}")
    seeds = spec.seeds()
    doc = seeds[rng.randrange(len(seeds))]
    names = list(_WEIGHTS)
    applied: list[str] = []
    if index % 10 != 0:  # every tenth case is an untouched seed: valid input must keep working
        for _ in range(rng.randint(1, 3)):
            name = rng.choices(names, weights=[_WEIGHTS[n] for n in names])[0]
            doc = _MUTATIONS[name](doc, rng)
            applied.append(name)
    suffix = ".json"
    if spec.gzip_ok and rng.random() < 0.2:
        packed = gzip.compress(doc, 1)
        if rng.random() < 0.3:
            packed = packed[: rng.randrange(len(packed) + 1)]
            applied.append("gzip-cut")
        else:
            applied.append("gzip")
        doc, suffix = packed, ".json.gz"
    return Case(kind, seed, index, doc, suffix, tuple(applied))


def have_corpus() -> bool:
    return (CORPUS / "traces").is_dir()


if __name__ == "__main__":  # write one case to a file, to reproduce a failure: python tests/fuzzing.py trace 1 42
    kind_, seed_, index_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    one = case(kind_, seed_, index_)
    out = Path(f"fuzz-{kind_}-{seed_}-{index_}{one.suffix}")
    out.write_bytes(one.data)
    print(f"{out}: {one.label}")
