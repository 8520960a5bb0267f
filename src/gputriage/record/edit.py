"""An edit of the user's file: the data a finding carries (evidence `edits`) for `--patch`.

Built by `rules/edits.py` from the recorded source, read back by `report/patch.py`; it lives here, in the record
layer, because both sides use it and it is plain data that round-trips through report.json.
"""

from __future__ import annotations

from typing import Any

import msgspec


class Edit(msgspec.Struct, frozen=True):
    path: str  # as `where` writes it
    line: int  # first line of the file that `old` covers
    old: tuple[str, ...]  # the file's lines as the run recorded them
    new: tuple[str, ...]  # what replaces them
    # move-data | move-model | register-buffer | device-in-forward | loader-args | read-rarely | comment-out |
    # validate-args
    kind: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "old": list(self.old), "new": list(self.new), "kind": self.kind}

    @classmethod
    def from_json(cls, doc: Any) -> Edit | None:
        """An edit from a finding's evidence; None when the shape is not one (a hand-edited report.json)."""
        if not isinstance(doc, dict):
            return None
        path, line, old, new, kind = (doc.get(k) for k in ("path", "line", "old", "new", "kind"))
        lines_ok = all(isinstance(x, list) and all(isinstance(s, str) for s in x) for x in (old, new))
        if not (isinstance(path, str) and isinstance(line, int) and line >= 1 and lines_ok and old):
            return None
        assert isinstance(old, list) and isinstance(new, list)
        return cls(path, line, tuple(old), tuple(new), str(kind))
