"""host-sync-in-loop's fix, written from the line that reads the device value: the script's own accumulator, loop
counter and statement (real cases: pytorch/examples vae and word_language_model, karpathy/makemore, a ViT loop)."""

from __future__ import annotations

import textwrap

from gputriage.record.source import SourceSection, SourceSnippet
from gputriage.rules import codefix, edits
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


LOGGED = textwrap.dedent(
    """\
    def train(epoch):
        for batch_idx, (data, target) in enumerate(train_loader):
            loss = F.nll_loss(model(data), target)
            if batch_idx % args.save_every == 0:
                torch.save(model.state_dict(), "ckpt.pt")
            torch.cuda.synchronize()
            print(f"loss {loss.item():.3f}")
            if batch_idx % args.log_interval == 0:
                logger.info("epoch %d", epoch)
            for k in range(4):
                if k % 2 == 0:
                    pass
    """
).rstrip("\n")

WHILE_LOOP = textwrap.dedent(
    """\
    while True:
        if iter_num % eval_interval == 0 and master_process:
            losses = estimate_loss()
        loss.backward()
        print(f"iter {iter_num}: loss {loss.item():.4f}")
        iter_num += 1
    """
).rstrip("\n")


def test_the_scripts_own_logging_interval_is_used_over_a_save_interval_and_a_fixed_100() -> None:
    source = SourceSection([SourceSnippet("main.py", 10, LOGGED, "function", "train")])
    sync = sync_fix(source, "main.py:15")
    assert "if batch_idx % args.log_interval == 0:\n    torch.cuda.synchronize()" in sync
    shown = sync_fix(source, "main.py:16")
    assert "show it every args.log_interval steps" in shown and "% 100" not in shown


def test_a_while_loop_takes_the_counter_and_interval_from_its_own_modulo_test() -> None:
    # nanoGPT's loop is `while True` at module level: no `for` counter, but its eval test names one.
    source = SourceSection([SourceSnippet("train.py", 200, WHILE_LOOP, "window", None)])
    fix = sync_fix(source, "train.py:204")
    assert 'if iter_num % eval_interval == 0:\n    print(f"iter {iter_num}: loss {loss.item():.4f}")' in fix


def test_a_read_under_the_scripts_own_interval_that_ran_every_step_gets_the_interval_as_its_fix() -> None:
    """pytorch/examples mnist with `--log-interval 1`: the print is under `if batch_idx % args.log_interval == 0:`
    already, and the fix wrapped it in that same test. The value of the interval is what to change, and the patch
    leaves the line alone. The value of the interval was not read: a counter that starts again in an outer loop
    passes the test as often (trial 8's forward-forward: "args.log_interval was 1 in this run", where it was 10)."""
    from gputriage.rules.edits import read_rarely

    loop = textwrap.dedent(
        """\
        def train(args, model, train_loader):
            for batch_idx, (data, target) in enumerate(train_loader):
                loss = F.nll_loss(model(data), target)
                if batch_idx % args.log_interval == 0:
                    print('Loss: {:.6f}'.format(
                        loss.item()))
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("main.py", 30, loop, "function", "train")])

    assert sync_fix(source, "main.py:35").splitlines() == [
        "# print('Loss: {:.6f}'.format(",
        "#     loss.item()))",
        "# runs only when batch_idx % args.log_interval == 0, yet it read the device at every probed step: "
        "args.log_interval is 1 in this run,",
        "# or the counter starts again at 0 each time round an outer loop. Count the steps with a counter that",
        "# keeps going, and set args.log_interval to 100 (--log-interval 100 on the command line) to read the value "
        "every 100 steps",
    ]
    assert read_rarely(source, "main.py:35") is None


def test_a_loop_at_the_modules_top_level_cut_mid_block_still_gives_its_own_interval() -> None:
    """makemore's loop runs at the module's top level, and the window around the line starts at an `else:`: the
    window did not parse, the fix fell back to `step % 100` while the script logs on `step % 10 == 0`."""
    window = textwrap.dedent(
        """\
            else:
                raise ValueError('unknown model')
            while True:
                loss.backward()
                if args.device.startswith('cuda'):
                    torch.cuda.synchronize()
                if step % 10 == 0:
                    print(f"step {step}")
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("makemore.py", 650, "    " + window.replace("\n", "\n    "), "window", None)])

    assert "if step % 10 == 0:\n    torch.cuda.synchronize()" in sync_fix(source, "makemore.py:655")


def test_a_loop_without_a_counter_is_given_one_not_a_name_it_lacks() -> None:
    """vit-pytorch's `for images, labels in dataloader:` has no step counter; the fix's `if step % 100 == 0:` raised
    NameError when pasted."""
    loop = textwrap.dedent(
        """\
        def train(model, dataloader):
            for images, labels in dataloader:
                loss = model(images, labels)
                print(f"loss {loss.item():.3f}")
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("train.py", 10, loop, "function", "train")])

    assert sync_fix(source, "train.py:13").splitlines() == [
        "# showing a device value waits for the device: show it every 100 steps",
        "# count the steps: for step, (images, labels) in enumerate(dataloader):",
        "if step % 100 == 0:",
        '    print(f"loss {loss.item():.3f}")',
    ]


def test_a_loop_at_the_scripts_top_level_keeps_its_own_counter() -> None:
    """A script's top-level `for step in range(60):` has its counter: the fix said `# count the steps: for step, step
    in enumerate(range(60)):`, a header that shadows the counter it already has."""
    window = textwrap.dedent(
        """\
        for step in range(60):
            loss = loss_fn(model(x), y)
            loss.backward()
            print(f"step {step} loss {loss.item():.3f}")
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("train.py", 8, window, "window", None)])

    assert sync_fix(source, "train.py:11").splitlines() == [
        "# showing a device value waits for the device: show it every 100 steps",
        "if step % 100 == 0:",
        '    print(f"step {step} loss {loss.item():.3f}")',
    ]


def test_a_read_that_decides_the_loops_path_is_said_to_be_one() -> None:
    """The seq2seq tutorial: `if decoder_input.item() == EOS_token: break` stops decoding on a device value. The fix
    was the logging template, with a `running_loss` and a `step` the script does not have."""
    loop = textwrap.dedent(
        """\
        def train(decoder, decoder_input, target_length):
            for di in range(target_length):
                decoder_output = decoder(decoder_input)
                decoder_input = decoder_output.topk(1)[1].squeeze().detach()
                if decoder_input.item() == EOS_token:
                    break
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("seq2seq.py", 260, loop, "function", "train")])

    fix = sync_fix(source, "seq2seq.py:264")
    assert fix.startswith("# if decoder_input.item() == EOS_token:\n# the loop decides its path from a device value")
    assert "running_loss" not in fix and "step %" not in fix


UNET = textwrap.dedent(
    """\
    def train_model(model, epochs):
        global_step = 0
        for epoch in range(1, epochs + 1):
            for batch in train_loader:
                loss = criterion(model(batch["image"]), batch["mask"])
                global_step += 1
                pbar.set_postfix(**{"loss (batch)": loss.item()})
                division_step = n_train // (5 * batch_size)
                if division_step > 0:
                    if global_step % division_step == 0:
                        evaluate(model)
    """
).rstrip("\n")


def test_an_interval_first_assigned_below_the_read_is_not_used_for_it() -> None:
    # milesial's UNet: the fix (and --patch) put the read under `global_step % division_step`, which the script
    # assigns two lines later: the patched job died of UnboundLocalError at its first step
    source = SourceSection([SourceSnippet("train.py", 10, UNET, "function", "train_model")])
    fix = sync_fix(source, "train.py:16")
    assert "division_step" not in fix
    assert "global_step % 100 == 0" in fix


def test_the_gradient_accumulation_cadence_is_no_reading_interval() -> None:
    """accelerate's nlp_example: `if step % gradient_accumulation_steps == 0: optimizer.step()` (1 in that run) was
    taken as when to log, and the patched print still read the loss at every step (trial 10)."""
    loop = textwrap.dedent(
        """\
        def train(model, loader, optimizer, accelerator, gradient_accumulation_steps):
            for step, batch in enumerate(loader):
                loss = model(**batch).loss / gradient_accumulation_steps
                accelerator.backward(loss)
                accelerator.print(f"step {step}: loss {loss.item():.4f}")
                if step % gradient_accumulation_steps == 0:
                    optimizer.step()
        """
    )
    fix = sync_fix(SourceSection([SourceSnippet("nlp.py", 10, loop, "function", "train")]), "nlp.py:14")
    assert "if step % 100 == 0:" in fix and "gradient_accumulation_steps == 0" not in fix


def test_an_assert_and_a_host_side_update_are_not_logged_values() -> None:
    """seq2seq's `assert (output == hidden).all()` and an EMA kept on the host (`ema_p.mul_(d).add_(p.cpu(), ...)`)
    were told to read the value every 100 steps, the fix for a printed loss (trial 10)."""
    loop = textwrap.dedent(
        """\
        def train(model, ema, loader):
            for step, batch in enumerate(loader):
                output, hidden = model(batch)
                assert (output == hidden).all()
                for ema_p, p in zip(ema.parameters(), model.parameters()):
                    ema_p.mul_(0.999).add_(p.detach().cpu(), alpha=0.001)
                history.append(output.mean().cpu())
        """
    )
    source = SourceSection([SourceSnippet("m.py", 10, loop, "function", "train")])
    check = sync_fix(source, "m.py:13")
    assert "delete it once it has served" in check and ".item() once where it is shown" not in check
    ema = sync_fix(source, "m.py:15")
    assert "p.detach().cpu() copies a device tensor to the host at every step" in ema
    assert "copies a device tensor" not in sync_fix(source, "m.py:16")  # a list of results is kept on the host


def test_a_module_level_loop_below_a_class_keeps_its_own_counter_and_tabs() -> None:
    """NCF (a trial): the capture's window starts inside the Dataset class above the loop, so it does not parse; the
    loop and its `count += 1` were lost, the fix invented a `step` counter and the patch had no edit. Tabs stay tabs:
    a tab beside four spaces is a TabError."""
    window = (
        "\tdef __getitem__(self, idx):\n\t\treturn self.x[idx]\n\n"
        "count, best_hr = 0, 0\nfor epoch in range(args.epochs):\n\tmodel.train()\n"
        "\tfor user, item, label in train_loader:\n\t\tloss = loss_function(model(user, item), label)\n"
        "\t\tloss.backward()\n\t\toptimizer.step()\n\t\tprint('step', count, 'loss', loss)\n\t\tcount += 1\n"
        '\tprint("The time elapse of epoch {:03d}".format(epoch) + " is: " +'
    )
    source = SourceSection([SourceSnippet("ncf.py", 77, window, "window", None)])
    where = "ncf.py:87"
    fix = sync_fix(source, where)
    assert "if count % 100 == 0:\n    print('step', count, 'loss', loss)" in fix and "step = 0" not in fix
    edit = edits.read_rarely(source, where)
    assert edit is not None and edit.new == (
        "\t\tif count % 100 == 0:  # read the device value every 100 steps",
        "\t\t\tprint('step', count, 'loss', loss)",
    )


def test_a_print_in_a_loop_inside_one_step_is_moved_out_not_guarded() -> None:
    """A char-RNN (a trial): `for c in range(chunk_len)` sums the loss, then one backward. The patch guarded the print
    with `if c % 100 == 0:`, true once per step: the read stayed every step."""
    body = textwrap.dedent(
        """\
        def train(self, inp, target):
            loss = 0
            for c in range(self.chunk_len):
                output, hidden = self(inp[:, c], hidden)
                loss += self.criterion(output, target[:, c])
                print('char %d loss %.4f' % (c, loss))
            loss.backward()
            self.optimizer.step()
            return loss.item() / self.chunk_len
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("char.py", 60, body, "function", "CharRNN.train")])
    fix = sync_fix(source, "char.py:65")
    assert "runs on every pass of `for c in ...`, inside one training step" in fix and "c % 100" not in fix
    assert edits.read_rarely(source, "char.py:65") is None


def test_an_evaluation_loop_before_the_training_loop_is_not_inside_a_step() -> None:
    body = textwrap.dedent(
        """\
        def run(epochs):
            for i, batch in enumerate(val_loader):
                print(model(batch).mean().item())
            for step, batch in enumerate(train_loader):
                model(batch).mean().backward()
                opt.step()
        """
    ).rstrip("\n")
    source = SourceSection([SourceSnippet("run.py", 10, body, "function", "run")])
    stmt = codefix.statement_at(source, "run.py:12")
    assert stmt is not None and edits.loop_within_step(stmt) is None
