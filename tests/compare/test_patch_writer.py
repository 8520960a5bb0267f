"""The patch writer on small sources: each edit kind, the parse check, and what stays advice (with its comment)."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

from gputriage.diagnosis import diagnose
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.edit import Edit
from gputriage.record.placement import StrayPart, TensorSeen
from gputriage.record.source import SourceSection, SourceSnippet
from gputriage.report.patch import build_patch
from gputriage.rules import edits

TRAIN = """\
import torch
from torch import nn
from torch.utils.data import DataLoader

device = torch.device("cuda")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.scale = torch.ones(2)  # a plain attribute

    def forward(self, x):
        pos = torch.arange(0, x.shape[0])
        return self.fc(x) * self.scale + pos[:, None]


def main():
    loader = DataLoader(list(range(8)), batch_size=4, num_workers=0)
    model = Net()
    model.head = nn.Linear(2, 2)
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        print(f"step {step} loss {loss}")
"""


def _source(path: str = "train.py", text: str = TRAIN) -> SourceSection:
    """The whole file as one snippet per top-level def, as the source collector records functions."""
    tree = ast.parse(text)
    lines = text.split("\n")
    snippets = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            for fn in [node] if isinstance(node, ast.FunctionDef) else node.body:
                if isinstance(fn, ast.FunctionDef):
                    body = "\n".join(lines[fn.lineno - 1 : fn.end_lineno])
                    snippets.append(SourceSnippet(path, fn.lineno, body, "function", fn.name))
    snippets += [
        SourceSnippet(path, n, line, "device") for n, line in enumerate(lines, 1) if line.startswith("device =")
    ]
    return SourceSection(snippets)


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), start=1) if needle in line)


def _finding(code: str, found: list[Edit], where: str = "train.py:1") -> Finding:
    return Finding(code, 2, Severity.CRITICAL, code, evidence=edits.evidence_of(found), fix="# the fix", where=where)


def _patch(tmp_path: Path, findings: list[Finding], text: str = TRAIN) -> str:
    (tmp_path / "train.py").write_text(text)
    diag = diagnose(Run(command="run"))
    diag.findings = findings
    return build_patch(diag, tmp_path).text


def _at(needle: str) -> str:
    return f"train.py:{_line(TRAIN, needle)}"


def _fixed(tmp_path: Path, by_code: dict[str, list[Edit]]) -> str:
    """The file after `git apply` of the patch of one finding per code, each with its edits."""
    return _apply(tmp_path, _patch(tmp_path, [_finding(code, found) for code, found in by_code.items()]))


def _apply(tmp_path: Path, patch: str) -> str:
    (tmp_path / "fix.patch").write_text(patch)
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True, capture_output=True)
    fixed = (tmp_path / "train.py").read_text()
    ast.parse(fixed)
    return fixed


def test_moving_inputs_uses_the_scripts_names_and_device(tmp_path: Path) -> None:
    where = f"train.py:{_line(TRAIN, 'out = model(x)')}"
    seen = TensorSeen("input", "cpu", [4], "float32", target="Net", argument="args[0]", where=where)
    found = edits.data_edits(_source(), [seen])
    assert [e.kind for e in found] == ["move-data"]
    fixed = _apply(tmp_path, _patch(tmp_path, [_finding("data-on-cpu", found, where)]))
    assert "        x = x.to(device, non_blocking=True)\n        out = model(x)" in fixed


def test_model_to_device_and_after_the_last_submodule(tmp_path: Path) -> None:
    moved = edits.model_edits(_source(), _at("model = Net()"), None)
    attached = edits.stray_edits(_source(), StrayPart("head", "module", "cpu", 6, _at("model.head =")), None)
    fixed = _fixed(tmp_path, {"model-on-cpu": moved, "model-partly-on-cpu": attached})
    assert "    model = Net().to(device)\n" in fixed
    assert "    model.head = nn.Linear(2, 2)\n    model.to(device)\n" in fixed


def test_register_buffer_and_device_in_forward(tmp_path: Path) -> None:
    buffer = edits.stray_edits(_source(), StrayPart("scale", "attribute", "cpu", 2, _at("self.scale =")), None)
    made = edits.forward_factory_edits(_source(), _at("torch.arange"))
    fixed = _fixed(tmp_path, {"model-partly-on-cpu": buffer, "device-mismatch-error": made})
    assert '        self.register_buffer("scale", torch.ones(2))  # a plain attribute\n' in fixed
    assert "pos = torch.arange(0, x.shape[0], device=x.device)" in fixed


def test_loader_arguments_and_reading_rarely(tmp_path: Path) -> None:
    wanted = {"num_workers": "3", "persistent_workers": "True", "pin_memory": "True"}
    loader = edits.loader_edits(_source(), _at("DataLoader(list"), wanted)
    rarely = edits.read_rarely_edits(_source(), _at("print("))
    fixed = _fixed(tmp_path, {"input-pipeline-bound": loader, "host-sync-in-loop": rarely})
    assert "DataLoader(list(range(8)), batch_size=4, num_workers=3, persistent_workers=True, pin_memory=True)" in fixed
    assert f"        if step % {edits.READ_EVERY_STEPS} == 0:" in fixed
    assert '            print(f"step {step} loss {loss}")' in fixed


def test_a_comment_that_names_a_changed_keyword_goes_with_the_old_value() -> None:
    """`num_workers=0,  # num_workers=0: the tensors are in memory` rewritten to 3 would keep a comment that now
    contradicts the line; a comment about something else stays."""
    text = TRAIN.replace(
        "    loader = DataLoader(list(range(8)), batch_size=4, num_workers=0)",
        "    loader = DataLoader(\n        list(range(8)),  # eight samples\n        batch_size=4,\n"
        "        num_workers=0,  # num_workers=0: the samples are in memory\n    )",
    )
    source = _source(text=text)
    [edit] = edits.loader_edits(source, f"train.py:{_line(text, 'DataLoader(')}", {"num_workers": "3"})
    assert "        num_workers=3," in edit.new
    assert "        list(range(8)),  # eight samples" in edit.new
    assert not any("in memory" in line for line in edit.new)


def test_a_finding_without_a_safe_edit_stays_advice_in_a_comment(tmp_path: Path) -> None:
    patch = _patch(tmp_path, [_finding("no-gpu-compute", [], "train.py:3")])
    assert "# no-gpu-compute at train.py:3: no safe edit; the report's fix stays advice" in patch
    assert "# nothing to apply" in patch
    assert "---" not in patch


def test_a_read_whose_value_is_used_is_not_edited() -> None:
    text = "def main():\n    for step in range(3):\n        value = loss.item()\n"
    assert edits.read_rarely_edits(_source(text=text), "train.py:3") == []


def test_a_file_changed_since_the_run_is_left_out(tmp_path: Path) -> None:
    found = edits.model_edits(_source(), f"train.py:{_line(TRAIN, 'model = Net()')}", None)
    changed = TRAIN.replace("model = Net()", "model = Net(3)")
    patch = _patch(tmp_path, [_finding("model-on-cpu", found)], text=changed)
    assert "changed since the run" in patch
    assert "+++" not in patch


def test_an_edit_that_would_not_parse_is_left_out(tmp_path: Path) -> None:
    line = _line(TRAIN, "model = Net()")
    broken = Edit("train.py", line, ("    model = Net()",), ("    model = Net((",), "move-model")
    patch = _patch(tmp_path, [_finding("model-on-cpu", [broken])])
    assert "would not parse" in patch
    assert "+++" not in patch


def test_a_path_outside_the_folder_is_left_out(tmp_path: Path) -> None:
    outside = Edit("../elsewhere.py", 1, ("x",), ("y",), "move-model")
    assert "is outside" in _patch(tmp_path, [_finding("model-on-cpu", [outside])])


def test_info_findings_are_not_patched(tmp_path: Path) -> None:
    found = edits.model_edits(_source(), f"train.py:{_line(TRAIN, 'model = Net()')}", None)
    note = _finding("model-on-cpu", found)
    note.severity = Severity.INFO
    assert "+++" not in _patch(tmp_path, [note])


def test_the_line_on_stderr_counts_every_edit_left_out_not_only_the_advice(tmp_path: Path) -> None:
    """A new user's patch held 0 edits, 1 advice and 2 edits left out for their file name; stderr said only
    "1 finding(s) left as advice"."""
    import io

    from gputriage.commands.loop import write_patch

    model = edits.model_edits(_source(), f"train.py:{_line(TRAIN, 'model = Net()')}", None)
    outside = Edit("../elsewhere.py", 1, ("x",), ("y",), "move-model")
    changed = TRAIN.replace("model = Net()", "model = Net(3)")
    (tmp_path / "train.py").write_text(changed)
    diag = diagnose(Run(command="run"))
    diag.findings = [
        _finding("no-gpu-compute", [], "train.py:3"),
        _finding("model-on-cpu", model),
        _finding("data-on-cpu", [outside]),
    ]
    patch = build_patch(diag, tmp_path)
    assert (patch.edits, patch.advice, patch.left_out) == (0, 1, 2)
    stream = io.StringIO()
    write_patch(diag, tmp_path / "fix.patch", tmp_path, stream)
    assert stream.getvalue().rstrip().endswith("1 finding(s) left as advice and 2 edit(s) left out (see its comments)")


def test_a_crlf_file_is_captured_without_its_carriage_returns_and_patched_in_its_own_line_ends(tmp_path: Path) -> None:
    # a user trial's CRLF modules.py: every edit was "left out: changed since the run" (the captured lines kept '\r')
    from gputriage.collectors.source_capture import capture

    crlf = TRAIN.replace("\n", "\r\n")
    (tmp_path / "train.py").write_bytes(crlf.encode())
    line = _line(TRAIN, "pos = torch.arange")
    section = capture([f"train.py:{line}"], [tmp_path])
    assert section.snippets and all("\r" not in s.text for s in section.snippets)
    found = edits.forward_factory_edits(section, f"train.py:{line}")
    assert found
    patch = _patch(tmp_path, [_finding("device-mismatch-error", found)], crlf)
    assert "left out" not in patch and "+        pos = torch.arange(0, x.shape[0], device=x.device)\r\n" in patch


def test_a_module_level_loader_over_many_lines_with_a_trailing_comma_gets_its_keywords_in_a_cut_window(
    tmp_path: Path,
) -> None:
    # PyTorch-GAN's wgan_gp: `dataloader = torch.utils.data.DataLoader(` over twelve lines at module level, in a window
    # that starts mid-class: the fix was a generic `loader = DataLoader(MNIST(...), ...)`, and an insertion before
    # the closing parenthesis after `shuffle=True,` would not parse
    text = (
        "        return img\n"
        "\n"
        "\n"
        "dataloader = torch.utils.data.DataLoader(\n"
        "    datasets.MNIST(\n"
        '        "data",\n'
        "        transform=transforms.ToTensor(),\n"
        "    ),\n"
        "    batch_size=opt.batch_size,\n"
        "    shuffle=True,\n"
        ")\n"
        "for epoch in range(opt.n_epochs):\n"
        "    for i, (imgs, _) in enumerate(dataloader):"
    )
    source = SourceSection([SourceSnippet("wgan_gp.py", 96, text, "window", None)])
    [edit] = edits.loader_edits(source, "wgan_gp.py:99", {"num_workers": "3", "pin_memory": "True"})
    assert edit.line == 99 and edit.new[0] == "dataloader = torch.utils.data.DataLoader("
    assert "    shuffle=True, num_workers=3, pin_memory=True," in edit.new
    ast.parse("\n".join(edit.new))


def test_the_scripts_own_workers_option_is_kept_with_a_floor() -> None:
    """SimCLR's `num_workers=args.workers` (0 by default) was replaced by a literal 3: `-j 8` no longer mattered."""
    text = TRAIN.replace("num_workers=0)", "num_workers=args.workers)")
    source = _source(text=text)
    [edit] = edits.loader_edits(source, f"train.py:{_line(text, 'DataLoader(')}", {"num_workers": "3"})
    assert any("num_workers=max(args.workers, 3)" in line for line in edit.new)
