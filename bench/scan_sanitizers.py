"""The compiled trace scanner under AddressSanitizer and UndefinedBehaviorSanitizer, on hostile bytes.

    .venv/bin/python bench/scan_sanitizers.py [--cases 20000]

Builds src/gputriage/tracing/_scan.c a second time with -fsanitize=address,undefined into bench/out/, then runs it
in a child Python (libasan and libubsan preloaded) over:
- real batches from every corpus trace, each with one to three bytes changed, deleted or inserted;
- the same batches cut anywhere, with a closing bracket added or not, and 70-deep nesting spliced in;
- the trace fuzzer's hostile files (tests/fuzzing.py), whole and cut;
- short random byte strings.

Each payload ends exactly where an unreadable page begins, so a read one byte past it kills the child; any other
out-of-bounds access, overflow or undefined behaviour stops it with the sanitizer's report. Either way this prints
what the child said and exits 1. (A scanner reading one byte too far, put in on purpose, dies here at once.) The
equivalence with the Python path is the tests' job (tests/trace/test_scan_equivalence.py); this is about memory
safety, which a test of results cannot show.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out" / "sanitized"
SOURCE = ROOT / "src" / "gputriage" / "tracing" / "_scan.c"
CHILD = r"""
import gzip, importlib.util, random, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
spec = importlib.util.spec_from_file_location("_scan", sys.argv[1])
scan = importlib.util.module_from_spec(spec)
spec.loader.exec_module(scan)
import fuzzing

import ctypes, mmap

# Each payload is copied to end exactly at a page that may not be read (PROT_NONE): a scanner that reads one byte
# past its buffer dies at once. (A bytes object has a NUL byte after its end, and ASan cannot see past it.)
PAGE = mmap.PAGESIZE
ARENA_PAGES = 64
arena = mmap.mmap(-1, (ARENA_PAGES + 1) * PAGE)
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
base = ctypes.addressof(ctypes.c_char.from_buffer(arena))
if libc.mprotect(base + ARENA_PAGES * PAGE, PAGE, 0) != 0:
    raise OSError(ctypes.get_errno(), "mprotect")
view = memoryview(arena)


def guarded(payload):
    if len(payload) > ARENA_PAGES * PAGE:
        return payload
    start = ARENA_PAGES * PAGE - len(payload)
    view[start : ARENA_PAGES * PAGE] = payload
    return view[start : ARENA_PAGES * PAGE]


cases = int(sys.argv[2])
rng = random.Random(1)
seeds = []
for path in sorted(Path(sys.argv[4]).rglob("*.json.gz")):
    data = gzip.decompress(path.read_bytes())
    start = data.find(b"[", data.find(b'"traceEvents"'))
    piece = data[start : start + 60_000]
    cut = piece.rfind(b"},")
    if start >= 0 and cut > 0:
        seeds.append(piece[: cut + 1] + b"]")
if not seeds:
    seeds.append(b'[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2, "args": {"stream": 7}}]')
alphabet = b'{}[]",:\\ 0123456789.-eEnulltrfaXu\x00\x1f\x7f\xff'
scans = accepted = 0


def run(payload):
    global scans, accepted
    scans += 1
    accepted += scan.scan(guarded(payload)) is not None


for _ in range(cases):
    s = bytearray(rng.choice(seeds))
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(s) or 1)
        kind = rng.randrange(3)
        byte = bytes([rng.choice(alphabet)])
        if kind == 0:
            s[at : at + 1] = byte
        elif kind == 1:
            del s[at : at + 1]
        else:
            s[at:at] = byte
    run(bytes(s))
for _ in range(cases // 4):
    s = bytearray(rng.choice(seeds))
    at = rng.randrange(len(s))
    if rng.randrange(2):
        s[at:at] = b"[" * 70 + b"]" * 70
    else:
        del s[at:]
    run(bytes(s))
    run(bytes(s) + b"]")
for index in range(min(cases // 20, 2000)):
    data = fuzzing.case("trace", 21, index).data
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except Exception:
            continue
    start = max(data.find(b"["), 0)
    run(data)
    run(data[start:])
    run(data[start : len(data) // 2] + b"]")
for _ in range(cases // 10):
    run(bytes(rng.randrange(256) for _ in range(rng.randrange(64))))
print(f"{scans:,} scans, {accepted:,} accepted, no sanitizer report")
"""


def build() -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    target = OUT / f"_scan{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    flags = ["-O1", "-g", "-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(target)], check=True)
    return target


def runtime(name: str) -> str:
    found = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True)
    return found.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    args = parser.parse_args()
    module = build()
    env = dict(os.environ)
    env["LD_PRELOAD"] = f"{runtime('libasan.so')} {runtime('libubsan.so')}"
    env["ASAN_OPTIONS"] = "detect_leaks=0"  # CPython's own allocations at exit are not the scanner's
    env["PYTHONMALLOC"] = "malloc"  # every allocation through malloc, where ASan sees it
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    corpus = ROOT.parent / "shared" / "corpus" / "traces"
    argv = [sys.executable, "-c", CHILD, str(module), str(args.cases), str(ROOT / "tests"), str(corpus)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    print(done.stdout.strip() or done.stderr[-4000:])
    return 0 if done.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
