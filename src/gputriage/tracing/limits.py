"""The explicit limits of the trace reader: what bounds its time, memory and temporary disk, whatever the input.

Memory does not depend on the trace's size (see store.py and sweep.py); what a file can still cost is time and
temporary disk, and these limits bound both. Each one is documented in docs/trace.md and raised with a flag of
`gputriage trace`. A file beyond a limit is refused with one line that names the flag.
"""

from __future__ import annotations

import msgspec

GIB = 1 << 30


class TraceLimits(msgspec.Struct, frozen=True):
    # JSON bytes read from one file (after gzip inflation): --max-gib. The largest real traces are a few GiB.
    max_bytes: int = 64 * GIB
    # Events in one file: --max-events. About 400 bytes of JSON each in a real trace, so 400 M is 150 GiB of JSON.
    max_events: int = 400_000_000
    # Inflated : compressed bytes of a .json.gz: --max-gzip-ratio. Real Kineto traces inflate 10-30x (the corpus
    # tops out at 29x); a decompression bomb of repeated text inflates 300-1000x. Checked once 16 MiB are inflated.
    max_gzip_ratio: float = 200.0
    gzip_ratio_after_bytes: int = 16 << 20


DEFAULT_LIMITS = TraceLimits()

# Fixed bounds that no real trace comes near (not flags: they only cap what a hostile file can make us keep).
MAX_NAME_CHARS = 1024  # a name is kept up to this length (the longest C++ kernel names in the corpus: ~600)
MAX_NAMES = 262_144  # distinct names kept; later new names share one "<other names>" entry per class
MAX_NAME_TEXT_CHARS = 32 << 20  # total characters of kept names
MAX_LANES = 65_536  # distinct (pid, tid) threads
MAX_FIELD_CHARS = 256  # header strings kept (device name, backend)
MAX_PIECE_BYTES = 64 << 20  # one event, or the header, larger than this is not a profiler trace we can read
