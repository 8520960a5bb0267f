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
import dataclasses
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from gputriage import outdir
from gputriage.errors import InputError
from gputriage.record.run import RUN_SCHEMA, Run

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


def decode_record(raw: bytes, source: str) -> Run:
    """A Run from the bytes of a rank record, a report.json or a run record; `source` names the file in messages.

    Raises:
        InputError: one line: which file, which field, what is wrong with it.
    """
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
        schema = header.run_schema
    if not isinstance(schema, str) or not schema.startswith(RUN_SCHEMA_PREFIX) or len(schema) > 64:
        raise InputError(
            f"{source} is not a gputriage report or run record (schema is {_shown(header.schema)}, expected "
            f"{REPORT_SCHEMA_PREFIX}1 or {RUN_SCHEMA!r})"
        )
    return schema


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
            sys.setrecursionlimit(DECODE_RECURSION_LIMIT)
            lowered = True
    try:
        yield
    finally:
        if lowered:
            sys.setrecursionlimit(old)


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


FieldPath = tuple[str | int, ...]


def _first_problem(root: object) -> tuple[str, str] | None:
    stack: list[tuple[object, FieldPath]] = [(root, ())]
    while stack:
        value, path = stack.pop()
        kind = type(value)
        if kind is int or kind is float or kind is str:
            message = _scalar_problem(value)
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
        elif dataclasses.is_dataclass(value):
            for name in _field_names(kind):
                stack.append((getattr(value, name), (*path, name)))
    return None


def _list_problem(
    items: list[Any] | tuple[Any, ...], path: FieldPath, stack: list[tuple[object, FieldPath]]
) -> tuple[str, str] | None:
    """Scalars are checked here; records that hold only scalars (a step, a sample) are checked field by field over the
    whole list, which is several times faster than one stack entry per value."""
    kind = _uniform_scalar_records(items)
    if kind is not None:
        for name in _field_names(kind):
            for index, item in enumerate(items):
                message = _scalar_problem(getattr(item, name))
                if message is not None:
                    return _path_text((*path, index, name)), message
        return None
    for index, item in enumerate(items):
        if type(item) in (int, float, str):
            message = _scalar_problem(item)
            if message is not None:
                return _path_text((*path, index)), message
        elif item is not None:
            stack.append((item, (*path, index)))
    return None


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


def _uniform_scalar_records(items: list[Any] | tuple[Any, ...]) -> type | None:
    """The record type of a list whose items are all of one type that holds only scalars, else None."""
    kind = type(items[0]) if items else None
    if kind is None or not _scalar_only(kind) or not all(type(item) is kind for item in items):
        return None
    return kind


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
_SCALAR_ONLY: dict[type, bool] = {}


def _field_names(kind: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(kind)
    if names is None:
        names = _FIELD_NAMES[kind] = tuple(f.name for f in dataclasses.fields(kind))
    return names


def _scalar_only(kind: type) -> bool:
    known = _SCALAR_ONLY.get(kind)
    if known is None:
        known = _SCALAR_ONLY[kind] = dataclasses.is_dataclass(kind) and _scalar_fields(kind)
    return known


def _scalar_fields(kind: Any) -> bool:
    """A record type whose every field holds a number, a string, a bool or None (Step, CollectiveEvent)."""
    return all(type(default) in (int, float, str, bool, type(None)) for default in _defaults(kind)) and all(
        isinstance(f.type, str) and _is_scalar_annotation(f.type) for f in dataclasses.fields(kind)
    )


def _defaults(kind: type) -> list[object]:
    return [f.default for f in dataclasses.fields(kind) if f.default is not dataclasses.MISSING]


_SCALAR_NAMES = frozenset({"int", "float", "str", "bool", "None"})


def _is_scalar_annotation(annotation: str) -> bool:
    return all(part.strip() in _SCALAR_NAMES for part in annotation.split("|"))


def _path_text(path: FieldPath) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(top level)"


def _shown(value: object) -> str:
    """A value from the file, for a message: short, and shown by repr so no control character reaches the terminal."""
    return repr(value[:60]) if isinstance(value, str) else ("null" if value is None else f"a {type(value).__name__}")
