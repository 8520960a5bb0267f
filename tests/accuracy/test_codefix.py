"""Fixes in the user's own code: built from the source snippets the record carries, with the script's names."""

from __future__ import annotations

import textwrap

from records import meta_run, model_on, placement

from gputriage.diagnosis import diagnose
from gputriage.record.placement import ModelInfo, StrayPart, TensorSeen
from gputriage.record.source import SourceSection, SourceSnippet
from gputriage.rules import codefix
from gputriage.rules.edits import forward_factory_edits, move_argument

TRAIN = textwrap.dedent(
    """\
    def train(loader, model, loss_fn, optimizer, device):
        for step, (images, labels) in enumerate(loader):
            labels = labels.to(device)
            output = model(images)
            loss = loss_fn(output, labels)
            loss.backward()
    """
).rstrip("\n")

ENCODING = textwrap.dedent(
    """\
        def __init__(self, d_model, max_len=512):
            super().__init__()
            pe = torch.zeros(max_len, 1, d_model)
            self.pe = pe
            self.scale = torch.ones(1)
    """
).rstrip("\n")

MASK = textwrap.dedent(
    """\
        def get_mask(self, n, device):
            if self.mask is not None and self.mask.shape[-1] >= n:
                return self.mask[:n, :n]
            mask = torch.ones((n, n), dtype=torch.bool).triu(1)
            self.register_buffer("mask", mask, persistent=False)
            return mask
    """
).rstrip("\n")

FORWARD = textwrap.dedent(
    """\
        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long)
            return self.wte(idx) + self.wpe(pos)
    """
).rstrip("\n")


LSTM_FORWARD = textwrap.dedent(
    """\
        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
            mask = torch.ones(3, 3, device=input.device)
            scale = torch.tensor(2.0)
    """
).rstrip("\n")


POSEMB = textwrap.dedent(
    """\
    def posemb_sincos_2d(patches, temperature=10000, dtype=torch.float32):
        _, h, w, dim, device, dtype = *patches.shape, patches.device, patches.dtype
        y, x = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        return torch.cat((x.sin(), y.cos()), dim=1)
    """
).rstrip("\n")


def source() -> SourceSection:
    return SourceSection(
        [
            SourceSnippet("vit.py", 12, POSEMB, "function", "posemb_sincos_2d"),
            SourceSnippet("train.py", 40, TRAIN, "function", "train"),
            SourceSnippet("model.py", 10, ENCODING, "function", "PositionalEncoding.__init__"),
            SourceSnippet("palm.py", 100, MASK, "function", "Block.get_mask"),
            SourceSnippet("gpt.py", 170, FORWARD, "function", "GPT.forward"),
            SourceSnippet("lstm.py", 15, LSTM_FORWARD, "function", "Sequence.forward"),
            SourceSnippet("main.py", 5, 'device = "cuda" if torch.cuda.is_available() else "cpu"', "device", None),
            SourceSnippet("main.py", 30, "net = Net()  # the model", "window", None),
        ]
    )


def test_the_statement_and_the_argument_in_the_users_names() -> None:
    stmt = codefix.statement_at(source(), "train.py:43")
    assert stmt is not None and stmt.text == "output = model(images)"
    expr = codefix.call_argument(stmt, "args[0]", "Net")
    assert expr is not None
    assert codefix.moved_argument(stmt, expr, "device") == "images = images.to(device, non_blocking=True)"
    loss = codefix.statement_at(source(), "train.py:44")
    assert loss is not None
    label = codefix.call_argument(loss, "args[1]", "CrossEntropyLoss")
    assert label is not None and codefix.moved_argument(loss, label, "device").startswith("labels = labels.to(")


def test_the_device_expression_the_script_already_uses() -> None:
    assert codefix.device_expression(source(), "train.py:43") == "device"
    assert codefix.device_expression(source(), "main.py:30") == "device"  # the file's own `device = ...`


def test_a_plain_attribute_becomes_a_registered_buffer() -> None:
    stmt = codefix.statement_at(source(), "model.py:13")
    assert stmt is not None
    assert codefix.register_buffer_fix(stmt) == 'self.register_buffer("pe", pe)  # instead of: self.pe = pe'


def test_a_tensor_made_in_forward_gets_the_devices_name_on_its_line() -> None:
    mask = codefix.factory_statement(source(), "palm.py:104")  # the register_buffer line: the mask is made above it
    assert mask is not None and mask.first_line == 103
    assert codefix.with_device(mask, codefix.forward_device(mask)) == (
        "mask = torch.ones((n, n), dtype=torch.bool, device=device).triu(1)"
    )
    pos = codefix.factory_statement(source(), "gpt.py:172")
    assert pos is not None
    assert codefix.with_device(pos, codefix.forward_device(pos)) == (
        "pos = torch.arange(0, t, dtype=torch.long, device=idx.device)"
    )


def test_every_factory_of_the_line_gets_the_device_the_function_unpacked() -> None:
    """A trial's SimpleViT: the fix read `torch.arange(h, device=x.device)`, with `x` assigned by that very line
    (UnboundLocalError when pasted), and left `torch.arange(w)` on the CPU; `device` was unpacked two lines up."""
    stmt = codefix.factory_statement(source(), "vit.py:14")
    assert stmt is not None
    assert codefix.forward_device(stmt) == "device"
    assert codefix.with_device(stmt, "device") == (
        'y, x = torch.meshgrid(torch.arange(h, device=device), torch.arange(w, device=device), indexing="ij")'
    )
    [edit] = forward_factory_edits(source(), "vit.py:14")
    assert edit.new[0].count("device=device") == 2


def test_a_host_constructor_is_moved_after_the_call_not_given_a_device_keyword() -> None:
    """`torch.LongTensor(np.arange(n))` inside forward: a legacy typed constructor refuses `device="cuda"`, and
    from_numpy takes no `device=`; the fix was the generic `t = torch.arange(n, device=x.device)` and no patch."""
    text = textwrap.dedent(
        """\
        def forward(self, x):
            positions = torch.LongTensor(np.arange(x.size(1)))
            offsets = torch.from_numpy(self.table).float()
            moved = torch.from_numpy(self.table).to(x.device)
            nested = torch.FloatTensor(torch.from_numpy(
                self.table))
            return self.emb(x + positions + offsets + moved + nested)
        """
    ).rstrip("\n")
    section = SourceSection([SourceSnippet("m.py", 20, text, "function", "M.forward")])
    fixed = {}
    for line in (21, 22, 23, 24):
        stmt = codefix.factory_statement(section, f"m.py:{line}")
        fixed[line] = codefix.with_device(stmt, "x.device") if stmt is not None else None
    assert fixed[21] == "positions = torch.LongTensor(np.arange(x.size(1))).to(x.device)"
    assert fixed[22] == "offsets = torch.from_numpy(self.table).to(x.device).float()"
    assert fixed[23] is None  # moved already
    assert fixed[24] == "nested = torch.FloatTensor(torch.from_numpy(self.table)).to(x.device)"
    [edit] = forward_factory_edits(section, "m.py:21")
    assert edit.new == ("    positions = torch.LongTensor(np.arange(x.size(1))).to(x.device)",)


def test_the_same_factory_on_other_lines_of_forward_is_fixed_with_it() -> None:
    """pytorch/examples time_sequence_prediction moved to a GPU: four torch.zeros lines, one crash at a time."""
    first = codefix.factory_statement(source(), "lstm.py:17")
    assert first is not None
    siblings = codefix.sibling_factory_statements(source(), first)
    assert [s.first_line for s in siblings] == [18, 19]  # not the mask (has device=), not another factory
    edits = forward_factory_edits(source(), "lstm.py:17")
    assert [e.line for e in edits] == [17, 18, 19]
    assert all("dtype=torch.double, device=input.device)" in e.new[0] for e in edits)


def test_the_data_fix_of_a_run_names_images_and_labels() -> None:
    seen = [
        TensorSeen("input", "cpu", [32, 3, 32, 32], "float32", "SmallConvNet", "args[0]", "train.py:43"),
        TensorSeen("label", "cpu", [32], "int64", "CrossEntropyLoss", "args[1]", "train.py:44"),
    ]
    run = meta_run(placement=placement(model_on("meta"), *seen), source=source())
    (finding,) = [f for f in diagnose(run).findings if f.code == "data-on-cpu"]
    # the loop moves `labels` in place at line 42: `images` goes beside it, in the same words (a trial's NCF)
    assert "# after line 42: labels = labels.to(device)\n" in finding.fix
    assert "images = images.to(device)" in finding.fix
    assert "labels = labels.to(device, non_blocking=True)" in finding.fix
    assert "x = x.to(" not in finding.fix


def test_the_model_fix_moves_the_users_variable_on_its_line() -> None:
    run = meta_run(placement=placement(model_on("cpu", where="main.py:30")), source=source())
    (finding,) = [f for f in diagnose(run).findings if f.code == "model-on-cpu"]
    assert finding.fix.startswith("net = Net().to(device)  # line 30")


def test_a_plain_attribute_finding_points_at_its_assignment_and_registers_a_buffer() -> None:
    model = ModelInfo(
        name="TransformerModel",
        parameter_count=1000,
        devices={"meta": 1000, "cpu": 16},
        where="main.py:30",
        stray=[StrayPart("pos_encoder.pe", "attribute", "cpu", 16, "model.py:13")],
    )
    run = meta_run(placement=placement(model), source=source())
    (finding,) = [f for f in diagnose(run).findings if f.code == "model-partly-on-cpu"]
    assert finding.where == "model.py:13"
    assert 'self.register_buffer("pe", pe)' in finding.fix


def test_every_plain_attribute_left_behind_gets_its_buffer_line_and_edit() -> None:
    """A trial's SiameseNetwork: pixel_mean and pixel_std; the fix and --patch registered pixel_mean alone, and the
    patched job died on pixel_std."""
    model = ModelInfo(
        name="TransformerModel",
        parameter_count=1000,
        devices={"meta": 1000, "cpu": 17},
        where="main.py:30",
        stray=[
            StrayPart("pos_encoder.pe", "attribute", "cpu", 16, "model.py:13"),
            StrayPart("pos_encoder.scale", "attribute", "cpu", 1, "model.py:14"),
        ],
    )
    run = meta_run(placement=placement(model), source=source())
    (finding,) = [f for f in diagnose(run).findings if f.code == "model-partly-on-cpu"]
    assert 'self.register_buffer("pe", pe)' in finding.fix
    assert 'self.register_buffer("scale", torch.ones(1))' in finding.fix
    assert [e["line"] for e in finding.evidence["edits"]] == [13, 14]


def test_without_source_the_fix_stays_generic() -> None:
    seen = TensorSeen("input", "cpu", [8, 16], "float32", "Net", "args[0]", "gone.py:3")
    run = meta_run(placement=placement(model_on("meta"), seen))
    (finding,) = [f for f in diagnose(run).findings if f.code == "data-on-cpu"]
    assert finding.fix.splitlines() == [
        'device = torch.device("meta")',
        "# before gone.py:3",
        "# move Net's args[0] (float32[8, 16]) to device before this call",
    ]


def test_an_indexed_argument_is_moved_in_place() -> None:
    snippet = SourceSnippet("loop.py", 1, "for batch in loader:\n    out = model(batch[0])", "window", None)
    stmt = codefix.statement_at(SourceSection([snippet]), "loop.py:2")
    assert stmt is not None
    expr = codefix.call_argument(stmt, "args[0]", "Net")
    assert expr is not None
    assert codefix.moved_argument(stmt, expr, "device") == "out = model(batch[0].to(device, non_blocking=True))"


def test_a_tensor_inside_a_tuple_argument_moves_with_its_siblings() -> None:
    """yunjey's language model: `model(inputs, states)` with states = (h, c) made on the CPU; a tuple has no .to()."""
    snippet = SourceSnippet(
        "lm.py", 74, "states = detach(states)\noutputs, states = model(inputs, states)", "window", None
    )
    source = SourceSection([snippet])
    stmt = codefix.statement_at(source, "lm.py:75")
    assert stmt is not None
    expr = codefix.call_argument(stmt, "args[1][0]", "RNNLM")
    assert expr is not None
    moved = codefix.moved_argument(stmt, expr, "device", "args[1][0]")
    assert moved == "states = tuple(t.to(device, non_blocking=True) for t in states)"
    edit = move_argument(source, "lm.py:75", "args[1][0]", "RNNLM", "device")
    assert edit is not None and edit.new[0] == moved


def test_a_tensor_of_a_tuple_written_in_the_call_is_moved_by_its_name() -> None:
    """`lstm(x, (h0, c0))` with h0 and c0 made on the CPU: each name moves, never `(h0, c0).to(...)`."""
    snippet = SourceSnippet("rnn.py", 7, "out, _ = lstm(x, (h0, c0))", "window", None)
    source = SourceSection([snippet])
    stmt = codefix.statement_at(source, "rnn.py:7")
    assert stmt is not None
    expr = codefix.call_argument(stmt, "args[1][1]", "LSTM")
    assert expr is not None
    assert codefix.moved_argument(stmt, expr, "device", "args[1][1]") == "c0 = c0.to(device, non_blocking=True)"
    edit = move_argument(source, "rnn.py:7", "args[1][0]", "LSTM", "device")
    assert edit is not None and edit.new[0] == "h0 = h0.to(device, non_blocking=True)"


def test_modules_in_a_plain_container_become_a_module_list_or_dict() -> None:
    text = "self.blocks = [nn.Linear(32, 32) for _ in range(3)]\nself.heads = {'a': nn.Linear(2, 2)}\nself.t = (a, b)"
    source = SourceSection([SourceSnippet("net.py", 9, text, "window", None)])
    fixes = [codefix.module_container_fix(codefix.statement_at(source, f"net.py:{n}")) for n in (9, 10, 11)]  # type: ignore[arg-type]
    assert fixes == [
        "self.blocks = nn.ModuleList([nn.Linear(32, 32) for _ in range(3)])",
        "self.heads = nn.ModuleDict({'a': nn.Linear(2, 2)})",
        "self.t = nn.ModuleList([a, b])",
    ]


def test_the_models_argument_is_found_among_chained_methods() -> None:
    """Lightning's DQN: `self.net(states).gather(1, ...).squeeze(-1)`: the tensor is `states`, never the `-1`."""
    text = "q = self.net(states).gather(1, actions.unsqueeze(-1)).squeeze(-1)\nv = self.target_net(nxt).max(1)[0]"
    source = SourceSection([SourceSnippet("q.py", 311, text, "window", None)])
    for line, name in ((311, "states"), (312, "nxt")):
        stmt = codefix.statement_at(source, f"q.py:{line}")
        assert stmt is not None
        expr = codefix.call_argument(stmt, "args[0]", "DQN")
        assert (
            expr is not None
            and codefix.moved_argument(stmt, expr, "device") == f"{name} = {name}.to(device, non_blocking=True)"
        )


def test_an_argument_moved_already_is_not_moved_twice() -> None:
    """`model(x.to(device))` that still reaches the model on the CPU: `device` names the CPU when the script runs
    (`"cuda" if torch.cuda.is_available() else "cpu"` without CUDA); a second `.to(device)` fixes nothing."""
    from gputriage.rules import edits

    code = "for x, y in loader:\n    out = model(x.to(dev))\n    loss = loss_fn(out, y.cuda())"
    section = SourceSection([SourceSnippet("loop.py", 1, code, "window", None)])
    stmt = codefix.statement_at(section, "loop.py:2")
    assert stmt is not None
    expr = codefix.call_argument(stmt, "args[0]", "Net")
    assert expr is not None and codefix.moved_already(expr) == "dev"
    line = codefix.moved_argument(stmt, expr, "dev")
    assert ".to(dev).to(" not in line and line.startswith("# x.to(dev) is moved already")
    assert "check where dev is set" in line
    assert edits.move_argument(section, "loop.py:2", "args[0]", "Net", "dev") is None  # no edit in --patch either
    loss = codefix.statement_at(section, "loop.py:3")
    assert loss is not None
    label = codefix.call_argument(loss, "args[1]", "CrossEntropyLoss")
    assert label is not None and codefix.moved_already(label) == "cuda"
    plain = codefix.call_argument(loss, "args[0]", "CrossEntropyLoss")
    assert plain is not None and codefix.moved_already(plain) is None


def test_a_loss_inside_the_library_the_line_calls_adds_no_made_up_name() -> None:
    """Transformers' `model(**batch, labels=labels)` computes its CrossEntropyLoss inside: the loss's target is seen
    at the user's line but is no argument there. The fix moves `labels`, and adds no `y = y.to(...)` for a `y` that
    the script does not have (corpus case 16)."""
    code = 'labels = batch.pop("labels")\nbatch = {k: v.to(device) for k, v in batch.items()}\n'
    code += "outputs = model(**batch, labels=labels)"
    section = SourceSection([SourceSnippet("train.py", 93, code, "window", None)])
    seen = [
        TensorSeen("label", "cpu", [8], "int64", "BertForSequenceClassification", "labels", "train.py:95"),
        TensorSeen("label", "cpu", [8], "int64", "CrossEntropyLoss", "args[1]", "train.py:95"),
    ]
    lines = codefix.moved_tensor_lines(section, seen, "device")
    assert lines == [
        "# before line 95: outputs = model(**batch, labels=labels)",
        "labels = labels.to(device, non_blocking=True)",
    ]
    alone = codefix.moved_tensor_lines(section, seen[1:], "device")[-1]
    assert alone == "# move CrossEntropyLoss's args[1] (int64[8]) to device before this call"  # no made-up `y`


def test_a_window_cut_inside_a_block_still_shows_the_device_the_script_moves_to() -> None:
    """makemore's loop at the module's top level: the window starts at an `else:` and does not parse whole; the
    `.to(args.device)` calls of its lines name the device, not `device = idx.device` of some model's forward."""
    window = "    else:\n        raise ValueError('type')\n    model.to(args.device)\n    while True:\n"
    window += "        X, Y = batch\n        X = X.to(args.device)\n        logits, loss = model(X, Y)\n"
    source = SourceSection(
        [
            SourceSnippet("makemore.py", 650, window, "window", None),
            SourceSnippet("makemore.py", 137, "        device = idx.device", "device", None),
        ]
    )
    assert codefix.device_expression(source, "makemore.py:656") == "args.device"


def test_a_tensor_of_a_starred_argument_moves_with_the_rest_of_it() -> None:
    """pytorch/examples' GCN: `output = model(*input)`; the probe saw GCN's args[1] on the CPU. The fix named a made-up
    `x`; now every tensor of `input` moves, in one line above the call, and the patch carries that line."""
    source = SourceSection([SourceSnippet("main.py", 170, "    output = model(*input)", "window", None)])
    seen = TensorSeen("input", "cpu", [8, 8], "float32", "GCN", "args[1]", "main.py:170")
    line = "input = tuple(t.to(device, non_blocking=True) if torch.is_tensor(t) else t for t in input)"

    assert codefix.moved_tensor_lines(source, [seen], "device") == ["# before line 170: output = model(*input)", line]
    edit = move_argument(source, "main.py:170", "args[1]", "GCN", "device")
    assert edit is not None and edit.new == (f"    {line}", "    output = model(*input)")


def test_without_the_calls_source_the_fix_names_the_tensor_and_invents_no_variable() -> None:
    seen = TensorSeen("input", "cpu", [8, 8], "float32", "GCN", "args[1]", "main.py:170")

    assert codefix.moved_tensor_lines(None, [seen], "device") == [
        "# before main.py:170",
        "# move GCN's args[1] (float32[8, 8]) to device before this call",
    ]


def test_a_buffer_fix_of_a_statement_on_two_lines_is_one_line() -> None:
    """minGPT's causal mask: `self.bias = torch.tril(...) \\` then `.view(...)` on the next line. The fix's comment
    quoted both lines, so it ended in a dangling backslash and a bare second line."""
    text = (
        "        self.bias = torch.tril(torch.ones(config.block_size, config.block_size)) \\\n"
        "                         .view(1, 1, config.block_size, config.block_size)"
    )
    stmt = codefix.statement_at(SourceSection([SourceSnippet("model.py", 47, text, "window", None)]), "model.py:47")
    assert stmt is not None
    fix = codefix.register_buffer_fix(stmt)
    assert fix is not None and "\n" not in fix and "\\" not in fix
    assert fix.endswith("# instead of: self.bias = torch.tril(torch.ones(config.block_size, config.block_size))"
                        ".view(1, 1, config.block_size, config.block_size)")  # fmt: skip


def test_a_batch_from_the_scripts_own_function_says_where_every_caller_gets_it() -> None:
    """nanoGPT's lecture gpt.py: `X, Y = get_batch(split)` in estimate_loss, and the same get_batch in the training
    loop. The fix moved Y at the first call site only; the patched job crashed at the second."""
    text = (
        "def estimate_loss():\n"
        "    for k in range(eval_iters):\n"
        "        X, Y = get_batch(split)\n"
        "        logits, loss = model(X, Y)\n"
        "        losses[k] = loss.item()"
    )
    source = SourceSection([SourceSnippet("gpt.py", 55, text, "function", "estimate_loss")])
    seen = TensorSeen("label", "cpu", [8, 32], "int64", "GPTLanguageModel", "args[1]", "gpt.py:58")

    assert codefix.moved_tensor_lines(source, [seen], "device") == [
        "# before line 58: logits, loss = model(X, Y)",
        "# Y comes from get_batch(split): moved there, before it returns, every caller gets it on the device; or:",
        "Y = Y.to(device, non_blocking=True)",
    ]
    sliced = SourceSection([SourceSnippet("gpt.py", 55, text.replace("get_batch(split)", "b[:, :-1].contiguous(), "
                                          "b[:, 1:].contiguous()"), "function", "estimate_loss")])  # fmt: skip
    assert not any("comes from" in line for line in codefix.moved_tensor_lines(sliced, [seen], "device"))


def test_the_tensors_a_batch_function_hands_out_with_the_one_that_crashed_are_named_to_move_alike() -> None:
    """pytorch/examples word_language_model with batchify's move dropped: `data, targets = get_batch(...)`, the model
    crashed on `data`; the fix moved `data`, and the patched job crashed on `targets` the next line."""
    text = (
        "for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):\n"
        "    data, targets = get_batch(train_data, i)\n"
        "    output, hidden = model(data, hidden)\n"
        "    loss = criterion(output, targets)"
    )
    source = SourceSection([SourceSnippet("main.py", 182, text, "window", None)])
    seen = TensorSeen("input", "cpu", [35, 20], "int64", "RNNModel", "args[0]", "main.py:184")
    lines = codefix.moved_tensor_lines(source, [seen], "device")
    assert lines[1] == (
        "# data comes from get_batch(train_data, i) (with targets, which come from it too: move them alike): moved "
        "there, before it returns, every caller gets it on the device; or:"
    )


def test_accelerates_device_and_a_cuda_index_are_the_scripts_words_for_its_device() -> None:
    """A trial: `device = torch.device("cuda")` invented where the function takes `accelerator` (accelerate), and
    where the script moves with `.cuda(self.cuda_index)`."""
    accel = "def train_fn(model, loader, optimizer, epoch, accelerator):\n"
    accel += "    for data in loader:\n        out = model(data[0])\n"
    source = SourceSection([SourceSnippet("train.py", 20, accel, "function", "train_fn")])
    assert codefix.device_expression(source, "train.py:22") == "accelerator.device"
    gan = (
        "    def train(self, loader):\n"
        "        for images, _ in loader:\n"
        "            real_labels = torch.ones(self.batch_size).cuda(self.cuda_index)\n"
        "            fake_labels = torch.zeros(self.batch_size)\n"
    )
    source = SourceSection([SourceSnippet("gan.py", 60, gan, "function", "GAN.train")])
    assert codefix.device_expression(source, "gan.py:63") == "self.cuda_index"


def test_an_accelerate_loop_is_told_of_prepare_beside_the_move() -> None:
    """imagenette-ddp (a trial): the training DataLoader left out of `accelerator.prepare`; the move is right, and
    prepare is accelerate's own way, which the fix never named."""
    from gputriage.findings import Severity
    from gputriage.record import Run
    from gputriage.record.placement import PlacementSection, TensorSeen
    from gputriage.rules.placement import placement_rule

    accel = "def train_fn(model, loader, optimizer, epoch, accelerator):\n"
    accel += "    for data in loader:\n        out = model(data[0])\n        loss = out.sum()\n"
    run = Run(command="run", expect_device="cuda", resolved_device="cuda")
    run.source = SourceSection([SourceSnippet("train.py", 20, accel, "function", "train_fn")])
    seen = TensorSeen("input", "cpu", [16, 3], "float32", "Net", "args[0]", "train.py:22")
    run.placement = PlacementSection(tensors=[seen])
    found = [f for f in placement_rule(run) if f.code == "data-on-cpu"]
    assert found and found[0].severity is Severity.CRITICAL
    assert "accelerator.prepare(...)" in found[0].fix and "accelerator.device" in found[0].fix
