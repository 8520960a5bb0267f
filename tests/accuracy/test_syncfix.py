"""host-sync-in-loop's fix, written from the line that reads the device value: the script's own accumulator, loop
counter and statement (real cases: pytorch/examples vae and word_language_model, karpathy/makemore, a ViT loop)."""

from __future__ import annotations

import textwrap

from gputriage.record.source import SourceSection, SourceSnippet
from gputriage.rules.syncfix import GENERIC_FIX, sync_fix

LOOP = textwrap.dedent(
    """\
    def train(epoch):
        for batch_idx, (data, _) in enumerate(train_loader):
            loss = loss_function(model(data), data)
            loss.backward()
            train_loss += loss.item()
            epoch_loss += loss.item() / len(train_loader)
            torch.cuda.synchronize()
            print(f"loss {loss.item():.3f}")
            acc = (output.argmax(dim=1).cpu().numpy() == label.cpu().numpy()).mean()
            lossf = loss.item()
    """
).rstrip("\n")


def _fix(line_in_loop: int) -> str:
    source = SourceSection([SourceSnippet("main.py", 90, LOOP, "function", "train")])
    return sync_fix(source, f"main.py:{90 + line_in_loop}")


def test_an_accumulator_stays_on_the_device_under_its_own_name() -> None:
    fix = _fix(4)
    assert "train_loss += loss.detach()" in fix and "train_loss.item()" in fix
    assert "epoch_loss += loss.detach() / len(train_loader)" in _fix(5)


def test_synchronize_is_dropped_or_kept_on_the_loops_own_counter() -> None:
    fix = _fix(6)
    assert "if batch_idx % 100 == 0:\n    torch.cuda.synchronize()" in fix


def test_a_print_is_shown_every_100_steps_of_the_loops_counter() -> None:
    assert 'if batch_idx % 100 == 0:\n    print(f"loss {loss.item():.3f}")' in _fix(7)


def test_other_reads_quote_the_users_line_with_what_to_do() -> None:
    metric = _fix(8)
    assert "acc = (output.argmax(dim=1).cpu().numpy() == label.cpu().numpy()).mean()" in metric
    assert "torch ops on the device" in metric and "+=" not in metric
    kept = _fix(9)  # a read whose value the loop uses: advice, not a rewrite that would hand it a tensor
    assert "lossf = loss.item()" in kept and "lossf = loss.detach()" not in kept


def test_without_the_source_the_fix_is_the_general_one() -> None:
    assert sync_fix(None, "main.py:94") == GENERIC_FIX
    assert sync_fix(SourceSection([]), None) == GENERIC_FIX
