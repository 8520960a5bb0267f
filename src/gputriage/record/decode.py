"""The one input boundary for saved records: a rank record (`DIR/ranks/rank-NNNNN.json`), a saved `report.json`, or a
bare run record. Every byte gputriage reads back from such a file goes through `decode_record`.

Records come from other machines and get forwarded around, so a record is hostile until checked:
- the JSON is decoded straight into the typed Run tree (strict: `"nan"` is not a float, `1.0` is not an int), so a
  field of the wrong type is one line naming the field; nesting is bounded by the types, and the decoder's own
  recursion limit is kept low for the parts it skips (`findings`, unknown keys);
- every number is range-checked: an integer outside int64, or a float that is not finite, is "field X is out of
  range" (JSON's own `1e999` and 5,000-digit numbers included), so no later division, float() or str() can overflow;
- every string is at most MAX_TEXT_CHARS long (an exception message, a path, an op name: far below it).
Numbers inside int64 are not trusted either: nothing in `report` or the merge allocates in proportion to one (the
merge lists at most `MAX_LISTED_MISSING` missing ranks, whatever `world_size` says). Where the bytes come from, and
how they are read without blocking, is `gputriage.outdir`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import operator
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from gputriage import outdir
from gputriage.errors import InputError
from gputriage.record.run import RUN_SCHEMA, Run
from gputriage.recursion import set_limit

REPORT_SCHEMA_PREFIX = "gputriage.report/"
RUN_SCHEMA_PREFIX = "gputriage.run/"
# The longest string a record may hold. gputriage's own collectors cut exception messages at 2,000 characters and
# command lines at 200; a string this long is not something a run wrote.
MAX_TEXT_CHARS = 1 << 16
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The JSON decoder recurses on nesting; parts of a record that no field reads (a report's `findings`, unknown keys of a
# newer version) are still parsed. Python's default limit keeps that shallow even where a job raised its own.
DECODE_RECURSION_LIMIT = 1000

_AT_PATH = re.compile(r"^(?P<what>.*?) - at `\$(?P<path>[^`]*)`$")


class _Header(msgspec.Struct):
    """The two keys that say what a document is; every other key is skipped on this first pass."""

    schema: Any = None
    run_schema: Any = None


def load_run(path: Path) -> Run:
    """A saved report.json or run record that the user named."""
    return decode_record(outdir.read_record(path), str(path))


def load_rank_record(path: Path) -> Run:
    """A rank record found in an --out folder: a regular file inside it (never a symlink), never blocking."""
    return decode_record(outdir.read_rank_record(path), str(path))


def run_from_dict(doc: dict[str, Any]) -> Run:
    """A Run from a bare run record already decoded from JSON, checked as `decode_record` checks one."""
    return convert_record(doc)


_UTF8_BOM = b"\xef\xbb\xbf"
_GZIP_MAGIC = b"\x1f\x8b"


def decode_record(raw: bytes, source: str) -> Run:
    """A Run from the bytes of a rank record, a report.json or a run record; `source` names the file in messages.

    Raises:
        InputError: one line: which file, which field, what is wrong with it.
    """
    if raw.startswith(_UTF8_BOM):  # an editor's byte-order mark (Notepad saves one): JSON's content is the rest
        raw = raw[len(_UTF8_BOM) :]
    if raw.startswith(_GZIP_MAGIC):
        raise InputError(f"{source} is gzip-compressed: decompress it (gunzip), then give the .json")
    with _shallow_recursion():
        header = _decode(raw, _Header, source)
        body_schema = _body_schema(header, source)
        run: Run = _decode(raw, Run, source)
    run.schema = body_schema
    check_values(run, source)
    return run


def convert_record(doc: dict[str, Any], source: str = "the run record") -> Run:
    """A Run from an already decoded JSON object (a bare run record), with the same checks as `decode_record`."""
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith(RUN_SCHEMA_PREFIX):
        raise InputError(
            f"{source} is not a gputriage run record (schema is {_shown(schema)}, expected {RUN_SCHEMA!r})"
        )
    _same_major(schema, RUN_SCHEMA_PREFIX, source)
    try:
        run = msgspec.convert(doc, type=Run, strict=True)
    except msgspec.ValidationError as exc:
        raise InputError(_field_message(source, exc)) from exc
    check_values(run, source)
    return run


def _decode(raw: bytes, kind: type[Any], source: str) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind, strict=True)
    except msgspec.ValidationError as exc:
        if kind is _Header:
            raise InputError(
                f"{source} is not a gputriage report or run record (the top level is not an object)"
            ) from exc
        raise InputError(_field_message(source, exc)) from exc
    except msgspec.DecodeError as exc:
        raise InputError(
            f"{source} is not valid JSON ({exc}); expected a gputriage report.json or rank record"
        ) from exc
    except RecursionError as exc:
        raise InputError(
            f"{source} nests deeper than any gputriage record (more than {DECODE_RECURSION_LIMIT} levels)"
        ) from exc


def _body_schema(header: _Header, source: str) -> str:
    """The run schema of the document: a report carries it as `run_schema`, a run record as `schema`."""
    schema = header.schema
    if isinstance(schema, str) and schema.startswith(REPORT_SCHEMA_PREFIX):
        _same_major(schema, REPORT_SCHEMA_PREFIX, source)
        if not isinstance(header.run_schema, str) or not header.run_schema.startswith(RUN_SCHEMA_PREFIX):
            raise InputError(  # the report's own schema is fine: the field that is wrong is named
                f"{source}: field run_schema is {_shown(header.run_schema)}, expected {RUN_SCHEMA!r} (a report names "
                "the run record it holds)"
            )
        schema = header.run_schema
    if not isinstance(schema, str) or not schema.startswith(RUN_SCHEMA_PREFIX) or len(schema) > 64:
        raise InputError(
            f"{source} is not a gputriage report or run record (schema is {_shown(header.schema)}, expected "
            f"{REPORT_SCHEMA_PREFIX}1 or {RUN_SCHEMA!r})"
        )
    _same_major(schema, RUN_SCHEMA_PREFIX, source)
    return schema


def _same_major(schema: str, prefix: str, source: str) -> None:
    """Version 1 and its additions ("1", "1.2") are read; another major version's fields may mean other things, so
    it is refused rather than read as this one (docs/contract.md: codes and fields are added, never renamed)."""
    version = schema.removeprefix(prefix)
    if version.split(".", 1)[0] != "1":
        raise InputError(
            f"{source} was written for schema {_shown(schema)}, which this gputriage does not read (it reads "
            f"{prefix}1): read it with the gputriage version that wrote it"
        )


def _field_message(source: str, exc: msgspec.ValidationError) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.rank_info.world_size`" as "field rank_info.world_size: ..."."""
    match = _AT_PATH.match(str(exc))
    if match is None:
        return f"{source} does not match {RUN_SCHEMA}: {exc}"
    field = match.group("path").lstrip(".") or "(top level)"
    what = match.group("what")
    if "out of range" in what:
        return f"{source}: field {field} is out of range"
    return f"{source}: field {field}: {what[:1].lower()}{what[1:]}"


@contextlib.contextmanager
def _shallow_recursion() -> Iterator[None]:
    old = sys.getrecursionlimit()
    lowered = False
    if old > DECODE_RECURSION_LIMIT:
        with contextlib.suppress(RecursionError):  # already deeper than the limit: keep the caller's
            set_limit(DECODE_RECURSION_LIMIT)
            lowered = True
    try:
        yield
    finally:
        if lowered:
            set_limit(old)


# --- the range check --------------------------------------------------------------------------------------------------
def check_values(run: Run, source: str) -> None:
    """Refuse a number outside int64, a float that is not finite, and a string longer than MAX_TEXT_CHARS.

    One walk over the record; a list of records that hold only numbers (steps, samples) is checked column by column.

    Raises:
        InputError: "SOURCE: field gpu.devices[0].samples[3].t_s is out of range (...)".
    """
    problem = _first_problem(run)
    if problem is not None:
        path, message = problem
        raise InputError(f"{source}: field {path} {message}")
    _each_rank_once(run, source)
    _parts_within_their_whole(run, source)


def _parts_within_their_whole(run: Run, source: str) -> None:
    """A part is never more than its whole: a trace's dropped events are some of its events (a hand-edited report
    with 10^12 dropped of 5,000 was shown as is)."""
    for index, rank in enumerate(run.trace.ranks if run.trace is not None else []):
        if rank.events is not None and rank.events_dropped is not None and rank.events_dropped > rank.events:
            raise InputError(
                f"{source}: field trace.ranks[{index}].events_dropped is out of range ({rank.events_dropped}): more "
                f"than the {rank.events} events the trace held"
            )


def _each_rank_once(run: Run, source: str) -> None:
    """A merged job lists each rank once (the merge keeps the newest record of a rank): a report with rank 0 listed
    5,000 times printed one finding 5,000 times; it is refused, as `trace` refuses two traces of one rank."""
    listed = [("ranks.ranks", [r.rank for r in run.ranks.ranks] if run.ranks is not None else [])]
    listed.append(("trace.ranks", [r.rank for r in run.trace.ranks if r.rank is not None] if run.trace else []))
    for field, ranks in listed:
        seen: set[int] = set()
        for rank in ranks:
            if rank in seen:
                raise InputError(f"{source}: field {field} lists rank {rank} twice; a job has each rank once")
            seen.add(rank)


FieldPath = tuple[str | int, ...]
# How a record type's fields are checked: "scalar" (a number, a string, a bool or None), "list" (a list of those), or
# "tree" (anything else, walked). A type whose fields are all scalars or lists is "flat" (a step, a GPU sample).
_SCALAR_TYPES = frozenset({"int", "float", "str", "bool", "None"})
_LAYOUTS: dict[type, dict[str, str] | None] = {}


# Fields that name a count, a duration, a share or a size (by the unit or word that ends their name: the record names
# every quantity with its unit): below zero, they are no measurement, and a view would print "-5 steps" or "-50%".
# Points in time (`start_s`, `t_s`, `ts`) are not durations and may be anything a clock gives.
_NOT_BELOW_ZERO = re.compile(
    r"(?:_us|_ms|_pct|_bytes|_bytes_per_s|count|_calls|calls|events|steps|numel|batches|_total|elements)$"
    r"|^(?:wall_s|time_s|self_s|wait_s|busy_s|sync_s|data_wait_s|forward_s|backward_s|optimizer_s|other_s|h2d_s)$"
)
_POINTS_IN_TIME = frozenset({"start_us", "start_s", "t_s", "ts", "created_at_s", "first_seen_s", "last_seen_s"})


# A share of a whole (the GPU's busy time of the window, a utilization sample): above 100% it is no measurement. Other
# percentages may pass 100 (a blocking share of overlapping threads), but not by orders of magnitude: a hand-edited
# 1e308 printed as a 309-digit percentage in every view.
_SHARE_OF_A_WHOLE = re.compile(r"^(?:busy|idle|compute|non_compute|util\w*)_pct$|_pct_of_(?:window|samples)$")
_MAX_SHARE_PCT = 100.0
# A duration longer than 30 years is no measurement either (a job, a step, a wait): in its own unit, by its name.
_MAX_DURATION_S = 1e9
_DURATION_UNIT = re.compile(r"_(us|ms|s)$")
_TO_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_MAX_ANY_PCT = 10_000.0


# Ranks and world sizes are process indices and counts (torch.distributed keeps them in 32-bit ints); a count of
# anything above 2**53 is no measurement (float64 cannot even hold it exactly): a hand-edited "steps 10**18" was shown
# in every view.
_RANKS = {"rank": (0.0, 2.0**31), "local_rank": (0.0, 2.0**31), "world_size": (1.0, 2.0**31)}
_COUNT = re.compile(r"(?:count|_calls|calls|events|steps|numel|batches|elements)(?:_observed|_seen|_watched)?$")
_MAX_COUNT = 2.0**53


@functools.lru_cache(maxsize=1024)
def _range_of(name: str) -> tuple[float, float]:
    """The values a field can hold, by its name (the record names every quantity with its unit)."""
    if name in _POINTS_IN_TIME:
        return -math.inf, math.inf
    if name in _RANKS:
        return _RANKS[name]
    if _COUNT.search(name):
        return 0.0, _MAX_COUNT
    low = 0.0 if _NOT_BELOW_ZERO.search(name) else -math.inf
    if "_pct" in name:
        return low, _MAX_SHARE_PCT if _SHARE_OF_A_WHOLE.search(name) else _MAX_ANY_PCT
    unit = _DURATION_UNIT.search(name)
    return low, _MAX_DURATION_S / _TO_SECONDS[unit.group(1)] if unit else math.inf


def _negative_problem(value: float, path: FieldPath) -> str | None:
    """A value out of its quantity's range, by the field's name: below zero, a percentage above its bound, a duration
    of more than 30 years."""
    name = next((part for part in reversed(path) if isinstance(part, str)), "")
    low, high = _range_of(name)
    if value < low:
        if name in _RANKS:
            return f"is out of range ({value:g}): a {name.replace('_', ' ')} is at least {low:g}"
        return f"is negative ({value:g}): a count, a duration, a share or a size cannot be"
    if value > high:
        what = (
            "a percentage here is at most"
            if "_pct" in name
            else "a count here is at most"
            if _COUNT.search(name) or name in _RANKS
            else "a duration here is at most"
        )
        return f"is out of range ({value:g}): {what} {high:g}"
    return None


def _first_problem(root: object) -> tuple[str, str] | None:
    stack: list[tuple[object, FieldPath]] = [(root, ())]
    while stack:
        value, path = stack.pop()
        kind = type(value)
        if kind is int or kind is float or kind is str:
            message = _scalar_problem(value)
            if message is None and kind is not str:
                assert isinstance(value, (int, float))
                message = _negative_problem(value, path)
            if message is not None:
                return _path_text(path), message
        elif kind is list or kind is tuple:
            assert isinstance(value, (list, tuple))
            problem = _list_problem(value, path, stack)
            if problem is not None:
                return problem
        elif kind is dict:
            assert isinstance(value, dict)
            for key, item in value.items():
                message = _scalar_problem(key)
                if message is not None:
                    return _path_text((*path, "key")), message
                stack.append((item, (*path, str(key)[:40])))
        elif (layout := _layout(kind)) is not None:
            for name in layout:
                stack.append((getattr(value, name), (*path, name)))
    return None


def _list_problem(
    items: list[Any] | tuple[Any, ...], path: FieldPath, stack: list[tuple[object, FieldPath]]
) -> tuple[str, str] | None:
    """Scalars are checked here. A list of flat records (steps, samples) is checked column by column in C-speed
    passes (`_column_is_clean`), value by value only where a column needs a closer look."""
    layout = _flat_layout(items)
    if layout is not None:
        for name, how in layout.items():
            column = list(map(operator.attrgetter(name), items))
            found = _column_problem(column, how == "list") or _column_negative(column, how == "list", name)
            if found is not None:
                where, what = found
                return _path_text((*path, where[0], name, *where[1:])), what
        return None
    for index, item in enumerate(items):
        if type(item) in (int, float, str):
            message = _scalar_problem(item)
            if message is None and type(item) is not str:
                message = _negative_problem(item, path)
            if message is not None:
                return _path_text((*path, index)), message
        elif item is not None:
            stack.append((item, (*path, index)))
    return None


def _column_negative(column: list[Any], of_lists: bool, name: str) -> tuple[tuple[int, ...], str] | None:
    """The first value out of range of a column whose name says it cannot be (below zero, see _NOT_BELOW_ZERO; a
    percentage above its bound)."""
    low, high = _range_of(name)
    if low == -math.inf and high == math.inf:
        return None
    # C-speed passes first, as _column_is_clean's: a column of numbers none below zero, the common case, needs no walk
    # value by value
    flat = [v for values in column if values is not None for v in values] if of_lists else column
    present = [v for v in flat if v is not None] if None in flat else flat
    numbers = not present or set(map(type, present)) <= {int, float, bool}
    if numbers and (not present or (min(present) >= low and max(present) <= high)):
        return None
    for index, values in enumerate(column):
        for inner, value in enumerate(values if of_lists and values is not None else (values,)):
            if type(value) in (int, float) and (message := _negative_problem(value, (name,))) is not None:
                return ((index, inner) if of_lists else (index,)), message
    return None


def _column_problem(column: list[Any], of_lists: bool) -> tuple[tuple[int, ...], str] | None:
    """Where the column's first bad value is (the item's index, and its index inside the item's list), and why."""
    flat = [value for values in column if values is not None for value in values] if of_lists else column
    if _column_is_clean(flat):
        return None
    for index, values in enumerate(column):
        for inner, value in enumerate(values if of_lists and values is not None else (values,)):
            message = _scalar_problem(value)
            if message is not None:
                return ((index, inner) if of_lists else (index,)), message
    return None


def _column_is_clean(column: list[Any]) -> bool:
    """The common case in C-speed passes: a column of finite floats, of int64 ints, or of short strings (None allowed).
    False means "look value by value", not that a value is bad."""
    present = [value for value in column if value is not None] if None in column else column
    kinds = set(map(type, present))
    if not present or kinds <= {bool}:
        return True
    if kinds <= {float, int, bool} and float in kinds:
        return all(map(math.isfinite, present)) and (int not in kinds or _ints_fit(present))
    if kinds <= {int, bool}:
        return _ints_fit(present)
    if kinds == {str}:
        return max(map(len, present)) <= MAX_TEXT_CHARS
    return False


def _ints_fit(values: list[Any]) -> bool:
    return bool(min(values) >= INT64_MIN and max(values) <= INT64_MAX)


def _scalar_problem(value: object) -> str | None:
    kind = type(value)
    if kind is int:
        assert isinstance(value, int)
        if not INT64_MIN <= value <= INT64_MAX:
            return "is out of range (beyond a 64-bit integer)"
    elif kind is float:
        assert isinstance(value, float)
        if not math.isfinite(value):
            return f"is out of range ({value})"
    elif kind is str:
        assert isinstance(value, str)
        if len(value) > MAX_TEXT_CHARS:
            return f"is too long ({len(value):,} characters; a record's strings are at most {MAX_TEXT_CHARS:,})"
    return None


def _flat_layout(items: list[Any] | tuple[Any, ...]) -> dict[str, str] | None:
    """The layout of the items' record type when all items are of one flat record type, else None."""
    kind = type(items[0]) if items else None
    layout = _layout(kind) if kind is not None else None
    if layout is None or "tree" in layout.values() or not all(type(item) is kind for item in items):
        return None
    return layout


def _layout(kind: type) -> dict[str, str] | None:
    """Each field of a record class with how it is checked; None for a type that is not one."""
    if kind not in _LAYOUTS:
        _LAYOUTS[kind] = None if not issubclass(kind, msgspec.Struct) else _kinds_of_fields(kind)
    return _LAYOUTS[kind]


def _kinds_of_fields(kind: type[msgspec.Struct]) -> dict[str, str]:
    # The annotations as written (strings here), a base class's fields included: resolving them would import what
    # only a type checker needs.
    written: dict[str, object] = {}
    for klass in reversed(kind.__mro__):
        written.update(inspect.get_annotations(klass))
    return {name: _field_kind(written[name]) for name in kind.__struct_fields__}


def _field_kind(annotation: object) -> str:
    """ "scalar" for "int | None", "list" for "list[str] | None", else "tree" (annotations are strings here)."""
    if not isinstance(annotation, str):
        return "tree"
    parts = [part.strip() for part in annotation.split("|")]
    if all(part in _SCALAR_TYPES for part in parts):
        return "scalar"
    inner = [part[len("list[") : -1] for part in parts if part.startswith("list[") and part.endswith("]")]
    rest = [part for part in parts if not part.startswith("list[")]
    if len(inner) == 1 and inner[0] in _SCALAR_TYPES and all(part == "None" for part in rest):
        return "list"
    return "tree"


def _path_text(path: FieldPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


def _shown(value: object) -> str:
    """A value from the file, for a message: short, and shown by repr so no control character reaches the terminal."""
    return repr(value[:60]) if isinstance(value, str) else ("null" if value is None else f"a {type(value).__name__}")
