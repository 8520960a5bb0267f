"""The machine-readable report (docs/contract.md): build it, and read a saved one back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from gputriage.diagnosis import Diagnosis
from gputriage.record import Run, run_from_dict, run_to_dict
from gputriage.record.decode import REPORT_SCHEMA_PREFIX, load_run
from gputriage.textsafe import encode_safely

REPORT_SCHEMA = f"{REPORT_SCHEMA_PREFIX}1"
_REPORT_KEYS = ("schema", "run_schema", "verdict", "ladder", "findings")


def build_document(diag: Diagnosis) -> dict[str, Any]:
    """The one JSON object of `--json` and `report.json`.

    The Run record's sections sit at the top level next to the verdict, so the document is both the contract and a
    complete saved run: `gputriage report report.json` re-renders it by re-running the (pure) rules.
    """
    run_doc = run_to_dict(diag.run)
    run_schema = run_doc.pop("schema")
    doc: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "run_schema": run_schema,
        "verdict": {
            "status": diag.verdict.status,
            "root_cause": diag.verdict.root_cause,
            "summary": diag.verdict.summary,
            "label": diag.verdict.label,
            "scope": diag.verdict.scope,
        },
        "ladder": [
            {
                "rung": r.rung,
                "question": r.question,
                "status": r.status,
                "finding_codes": r.finding_codes,
                "reason": r.reason,
            }
            for r in diag.ladder
        ],
        "findings": [f.to_json() for f in diag.findings],
    }
    doc.update(run_doc)
    _add_device_verdicts(doc, diag.device_verdicts)
    return doc


def _add_device_verdicts(doc: dict[str, Any], verdicts: dict[int, str]) -> None:
    """Each GPU track of the `gpu` section carries its one-line state ("idle while ... holds 12.0 GiB") in the JSON;
    the diagnosis computes it, the record does not store it."""
    gpu = doc.get("gpu")
    if not isinstance(gpu, dict):
        return
    for track in gpu.get("devices") or []:
        track["verdict"] = verdicts.get(track.get("index"))


def encode_document(doc: dict[str, Any]) -> bytes:
    return msgspec.json.format(encode_safely(doc), indent=2) + b"\n"


def run_from_document(doc: dict[str, Any]) -> Run:
    """Accept either a report document (report.json) or a bare run record."""
    if doc.get("schema") == REPORT_SCHEMA:
        body = {k: v for k, v in doc.items() if k not in _REPORT_KEYS}
        body["schema"] = doc.get("run_schema")
        return run_from_dict(body)
    return run_from_dict(doc)


def load_document(path: Path) -> Run:
    """A saved report.json (or a bare run record), read and checked at the one input boundary (record/decode.py)."""
    return load_run(path)
