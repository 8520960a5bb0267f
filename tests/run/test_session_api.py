"""`gputriage.session()`: the same evidence as `gputriage run`, around a block of code in this process."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest


def test_importing_gputriage_does_not_import_torch() -> None:
    code = "import sys, gputriage; gputriage.session; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_inference_loop_without_optimizer_counts_steps_at_each_batch() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    import gputriage

    loader = DataLoader(TensorDataset(torch.randn(40, 8)), batch_size=5)
    with gputriage.session(expect_device="meta") as s:
        model = nn.Linear(8, 2).to("meta")
        with torch.no_grad():
            for (x,) in loader:
                model(x.to("meta"))  # the inputs are moved: a healthy inference loop
    steps = s.run.steps if s.run is not None else None
    assert steps is not None
    assert steps.step_source == "dataloader"
    assert steps.steps_observed == 8
    assert s.run is not None and s.run.self_check() == []
    assert [f.code for f in s.findings if f.severity.value != "info"] == []
    text = io.StringIO()
    s.report(stream=text)
    assert "gputriage verdict" in text.getvalue()


def test_session_records_placement_and_the_line() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    import gputriage

    with gputriage.session(expect_device="meta") as s:
        model = nn.Linear(8, 2)  # never moved
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    codes = [f.code for f in s.findings]
    assert codes[:2] == ["data-on-cpu", "model-on-cpu"]
    model_finding = s.findings[1]
    assert model_finding.where is not None and model_finding.where.endswith("test_session_api.py:48")
    with pytest.raises(RuntimeError, match="still recording"):
        gputriage.session().findings  # noqa: B018  (reading the property is the test)


def test_a_failing_observer_never_raises_into_the_users_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    import gputriage
    from gputriage.collectors import gpu_observer

    def broken(self: object, run: object) -> None:
        raise RuntimeError("planted observer failure")

    monkeypatch.setattr(gpu_observer.GpuSamplerObserver, "start", broken)
    monkeypatch.setattr(gpu_observer.GpuSamplerObserver, "finish", broken)
    with gputriage.session(expect_device="meta") as s:
        model = nn.Linear(4, 2).to("meta")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.randn(8, 4, device="meta")).sum().backward()
            opt.step()
    assert "an observer failed (RuntimeError: planted observer failure)" in capsys.readouterr().err
    assert s.run is not None and s.run.steps is not None and len(s.run.steps.steps) >= 2
    assert s.run.gpu is None  # the failed observer is left out, the others still recorded
