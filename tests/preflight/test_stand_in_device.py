"""The stand-in device as a script written for CUDA sees it: placement, CUDA's mismatches, host reads, the torch.cuda
API, autocast and GradScaler, checkpoints and copies."""

from __future__ import annotations

import copy
import io
import pickle
from typing import Any

import pytest
import torch
from preflight_session import FakeProbe, Session, session
from torch import nn

from gputriage.collectors.preflight import Backing
from gputriage.collectors.preflight.state import STATE

MISMATCH = "Expected all tensors to be on the same device"


def test_cuda_is_available_with_one_named_device(stand_in: Session) -> None:
    assert torch.cuda.is_available()
    assert torch.cuda.device_count() == 1
    assert "stand-in" in torch.cuda.get_device_name(0)
    assert torch.cuda.get_device_capability() == (8, 0)
    props = torch.cuda.get_device_properties(0)
    assert props.total_memory > 0 and props.multi_processor_count > 0
    assert torch.cuda.is_bf16_supported()
    assert torch.backends.cudnn.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("cuda")


@pytest.mark.parametrize(
    "place",
    [
        lambda t: t.to("cuda"),
        lambda t: t.to(torch.device("cuda:0")),
        lambda t: t.cuda(),
        lambda t: t.to("cuda", non_blocking=True),
        lambda t: t.to(0),
        lambda t: torch.tensor(t.tolist(), device="cuda"),
        lambda t: torch.zeros_like(t, device="cuda") + t.cuda(),
    ],
)
def test_every_spelling_of_cuda_lands_on_the_stand_in(stand_in: Session, place: Any) -> None:
    host = torch.arange(6.0).reshape(2, 3)
    on_device = place(host)
    assert on_device.device == torch.device("cuda", 0)
    assert on_device.is_cuda
    assert torch.equal(on_device.cpu(), host)
    assert on_device.cpu().device.type == "cpu"


def test_module_to_cuda_keeps_the_parameter_objects_the_optimizer_holds(stand_in: Session) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    weight = model.weight
    before = weight.detach().clone()
    model.cuda()
    assert model.weight is weight
    assert isinstance(model.weight, nn.Parameter) and model.weight.device.type == "cuda"
    loss = model(torch.randn(3, 4, device="cuda")).pow(2).sum()
    loss.backward()
    assert model.weight.grad is not None and model.weight.grad.device.type == "cuda"
    opt.step()
    assert not torch.equal(model.weight.detach().cpu(), before)


def test_values_are_computed_like_on_the_cpu(stand_in: Session) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x = torch.randn(5, 8)
    expected = model(x)
    on_device = copy.deepcopy(model).to("cuda")(x.to("cuda"))
    assert torch.allclose(on_device.cpu(), expected, atol=1e-6)


def test_embedding_fed_cpu_indices_raises_cudas_error(stand_in: Session) -> None:
    embedding = nn.Embedding(10, 4).to("cuda")
    pos = torch.arange(0, 3, dtype=torch.long)  # the classic: made without device=
    with pytest.raises(RuntimeError, match=MISMATCH):
        embedding(pos)


def test_cpu_input_into_a_device_layer_raises(stand_in: Session) -> None:
    with pytest.raises(RuntimeError, match=MISMATCH) as linear:
        nn.Linear(4, 2).cuda()(torch.randn(3, 4))
    # CUDA's own wrapper names: a structured kernel has one underscore, an unstructured one two
    assert "mat1 is on cpu, different from other tensors on cuda:0" in str(linear.value)
    assert str(linear.value).endswith("(when checking argument in method wrapper_CUDA_addmm)")
    # the model left on the CPU, the batch moved: the wrapper's common device is its first tensor's (the bias, on the
    # CPU), and mat1 is the odd one, as a torch-2 log on a GPU reads (a trial's VAE got the two swapped)
    with pytest.raises(RuntimeError, match=MISMATCH) as unmoved:
        nn.Linear(4, 2)(torch.randn(3, 4, device="cuda"))
    assert "but got mat1 is on cuda:0, different from other tensors on cpu" in str(unmoved.value)
    with pytest.raises(RuntimeError, match=r"method wrapper_CUDA__index_select\)") as indices:
        nn.Embedding(10, 4).cuda()(torch.arange(3))
    assert "index is on cpu, different from other tensors on cuda:0" in str(indices.value)
    # the model left on the CPU, the batch moved: CUDA's check starts from the weight, and names the index as odd
    with pytest.raises(RuntimeError, match=r"method wrapper_CUDA__index_select\)") as weight:
        nn.Embedding(10, 4)(torch.arange(3, device="cuda"))
    assert "index is on cuda:0, different from other tensors on cpu" in str(weight.value)
    lstm, x = nn.LSTM(4, 8, batch_first=True).cuda(), torch.randn(2, 5, 4, device="cuda")
    hidden = "Input and hidden tensors are not at the same device, found input tensor at cuda:0 and hidden tensor at"
    with pytest.raises(RuntimeError, match=hidden):  # cuDNN's RNN check, not the CPU layer's op name
        lstm(x, (torch.zeros(1, 2, 8), torch.zeros(1, 2, 8)))
    with pytest.raises(RuntimeError, match=r"Input type \(torch.FloatTensor\) and weight type \(torch.cuda"):
        nn.Conv2d(3, 4, 3).cuda()(torch.randn(1, 3, 8, 8))
    with pytest.raises(RuntimeError, match="expected self and mask to be on the same device"):
        torch.zeros(3, device="cuda").masked_fill(torch.tensor([True, False, True]), 1.0)
    # self is the CPU one: CUDA's check still names the mask and self (was: "expected self and self")
    with pytest.raises(RuntimeError) as host_self:
        torch.zeros(3).masked_fill(torch.tensor([True, False, True], device="cuda"), 1.0)
    assert str(host_self.value) == (
        "expected self and mask to be on the same device, but got mask on cuda:0 and self on cpu"
    )


def test_a_list_of_device_scalars_becomes_a_tensor_as_on_cuda(stand_in: Session) -> None:
    """`torch.tensor([R])` with R a 0-d CUDA tensor (pytorch/examples' actor_critic: `torch.tensor([R])` of returns)
    reads R on the host, as CUDA does; it died with "data is not allocated yet"."""
    returns = torch.arange(3.0, device="cuda")
    made = [torch.tensor([r], device="cuda") for r in returns]
    assert [t.device.type for t in made] == ["cuda"] * 3
    assert torch.equal(torch.cat(made).cpu(), torch.arange(3.0))
    nested = torch.tensor([[returns[0], returns[1]], [returns[2], 5.0]])
    assert nested.device.type == "cpu" and nested.tolist() == [[0.0, 1.0], [2.0, 5.0]]


def test_composites_that_make_helper_tensors_inside_run_as_on_cuda_and_a_host_operand_still_raises(
    stand_in: Session,
) -> None:
    # F.one_hot and ctc_loss build helpers from their operand's C++ options ("cpu" on the stand-in); a user trial's
    # healthy UNet died at one_hot and was blamed with a critical device-mismatch-error
    labels = torch.randint(0, 3, (2, 4), device="cuda")
    assert nn.functional.one_hot(labels, 3).device == torch.device("cuda", 0)
    logits = torch.randn(5, 2, 4, device="cuda").log_softmax(2)
    targets = torch.randint(1, 4, (2, 3), device="cuda")
    assert nn.functional.ctc_loss(logits, targets, [5, 5], [3, 3]).device.type == "cuda"
    with pytest.raises(RuntimeError, match=MISMATCH):  # the caller's own host tensor is CUDA's error still
        torch.cdist(torch.randn(2, 3, device="cuda"), torch.randn(2, 3))
    q = torch.randn(1, 2, 4, 8, device="cuda")
    with pytest.raises(RuntimeError, match=MISMATCH):  # ... also where C++ turns it into another (a float mask)
        nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool).tril())


@pytest.mark.parametrize(
    "move",
    [
        lambda m, d: m.to(device=d),
        lambda m, d: m.to(device="cuda", dtype=torch.float32),
        lambda m, d: m.to(torch.zeros(1, device=d)),
        lambda m, d: m.to(0),  # the DDP tutorial's `model.to(gpu_id)` with `device = 0` (was: "Cannot access
        lambda m, d: m.to(device=0),  # accelerator device when none is available", the job dead at that line)
    ],
)
def test_module_to_by_keyword_or_by_tensor_moves_the_model(stand_in: Session, move: Any) -> None:
    # `model.to(device=device)` (milesial's UNet) left the model on the CPU: a false model-on-cpu on a healthy script
    model = nn.Linear(4, 2)
    move(model, torch.device("cuda"))
    assert next(model.parameters()).device == torch.device("cuda", 0)


def test_what_cuda_allows_across_devices_works(stand_in: Session) -> None:
    x = torch.arange(6.0, device="cuda")
    assert (x * torch.tensor(2.0)).device.type == "cuda"  # a 0-d CPU scalar
    assert x[torch.tensor([0, 2])].tolist() == [0.0, 2.0]  # CPU indices
    host = torch.empty(6)
    host.copy_(x)  # a copy to the host
    assert host.tolist() == x.tolist()


def test_a_host_tensor_indexed_with_device_indices_raises_cudas_index_error(stand_in: Session) -> None:
    """A trial's GCN with its labels left on the CPU: `labels[idx]` with `idx` on the device ran on the stand-in and
    came back on the device, hiding the mistake; CUDA refuses it (TORCH_CHECK_INDEX: an IndexError)."""
    labels = torch.arange(10)
    idx = torch.randperm(10).to("cuda")
    expected = r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"
    with pytest.raises(IndexError, match=expected):
        labels[idx[:4]]
    with pytest.raises(IndexError, match=expected):
        labels[idx[:2]] = 0
    assert labels[idx.cpu()[:4]].device.type == "cpu"  # host indices into a host tensor


def test_host_reads_give_values_and_count_nothing_extra(stand_in: Session) -> None:
    loss = (torch.ones(4, device="cuda") * 2.5).sum()
    assert loss.item() == 10.0
    assert float(loss) == 10.0 and int(loss) == 10 and bool(loss)
    assert f"{loss:.1f}" == "10.0"
    assert torch.ones(2, device="cuda").tolist() == [1.0, 1.0]
    assert "device='cuda:0'" in repr(loss)
    with pytest.raises(TypeError, match="can't convert cuda:0 device type tensor to numpy"):
        loss.numpy()
    assert loss.cpu().numpy() == 10.0


def test_a_loss_computed_on_the_host_still_trains_the_device_model(stand_in: Session) -> None:
    model = nn.Linear(3, 1).cuda()
    out = model(torch.randn(4, 3, device="cuda")).cpu()
    nn.functional.mse_loss(out, torch.zeros(4, 1)).backward()
    assert model.weight.grad is not None and model.weight.grad.device.type == "cuda"


def test_synchronize_and_event_waits_are_host_syncs(stand_in: Session) -> None:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.ones(8, device="cuda").sum()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0
    assert [kind for kind, _ in stand_in.probe.syncs].count("cuda-sync") >= 2
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.ones(2, device="cuda")
    torch.cuda.current_stream().wait_stream(stream)


def test_device_selection_and_memory(stand_in: Session) -> None:
    torch.cuda.set_device(0)
    assert torch.cuda.current_device() == 0
    with torch.cuda.device(0):
        big = torch.zeros(1024, 1024, device="cuda")
    assert torch.cuda.memory_allocated() >= big.numel() * 4
    assert torch.cuda.max_memory_allocated() >= torch.cuda.memory_allocated()
    torch.cuda.empty_cache()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.zeros(1, device="cuda:1")


def test_cuda_random_stream_is_seeded_and_leaves_the_cpu_stream_alone(stand_in: Session) -> None:
    torch.manual_seed(7)
    first = torch.randn(4, device="cuda").cpu()
    cpu_after = torch.rand(3)
    torch.manual_seed(7)
    cpu_alone = torch.rand(3)  # no cuda draw in between: the CPU stream must be the same
    torch.manual_seed(7)
    assert torch.equal(torch.randn(4, device="cuda").cpu(), first)
    assert torch.equal(cpu_after, cpu_alone)
    state = torch.cuda.get_rng_state()
    again = torch.randn(2, device="cuda").cpu()
    torch.cuda.set_rng_state(state)
    assert torch.equal(torch.randn(2, device="cuda").cpu(), again)


def test_pin_memory_non_blocking_and_cudnn_flags(stand_in: Session) -> None:
    host = torch.randn(4)
    pinned = host.pin_memory()
    assert pinned.is_pinned() and not host.is_pinned()
    assert pinned.to("cuda", non_blocking=True).device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(8, 2)), batch_size=4, pin_memory=True
    )
    assert all(batch.is_pinned() for (batch,) in loader)


def test_autocast_cuda_casts_and_grad_scaler_steps(stand_in: Session) -> None:
    model = nn.Linear(8, 8).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for scaler in (torch.amp.GradScaler("cuda"), torch.cuda.amp.GradScaler()):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(torch.randn(2, 8, device="cuda"))
            assert out.dtype == torch.bfloat16
            assert torch.is_autocast_enabled("cuda")
        scaler.scale(out.float().sum()).backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.is_enabled()
    with torch.autocast(device_type="cuda"):
        assert model(torch.randn(2, 8, device="cuda")).dtype == torch.float16  # CUDA's default


def test_causal_attention_with_dropout_trains_as_on_cuda(stand_in: Session) -> None:
    """SDPA's math path (is_causal with dropout, on the CPU backing) built its causal mask from the query's C++
    options, a plain CPU tensor: nn.Transformer with a causal target mask died in training mode, as no GPU run does.
    The output is the causal one: with dropout off, equal to an explicit lower-triangular mask."""
    torch.manual_seed(0)
    model = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    model = model.cuda().train()
    src, tgt = torch.randn(6, 3, 16, device="cuda"), torch.randn(5, 3, 16, device="cuda")
    causal = nn.Transformer.generate_square_subsequent_mask(5, device="cuda")
    model(src, tgt, tgt_mask=causal, tgt_is_causal=True).sum().backward()
    q, k, v = (torch.randn(2, 2, 5, 8, device="cuda", requires_grad=True) for _ in range(3))
    out = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.5, is_causal=True)
    assert out.device.type == "cuda"
    out.sum().backward()
    plain = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    tril = torch.ones(5, 5, dtype=torch.bool, device="cuda").tril()
    assert torch.allclose(plain, nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=tril))


def test_an_rnn_on_the_stand_in_prints_no_cudnn_warning(stand_in: Session) -> None:
    """torch.backends.cudnn is a wrapper module whose is_acceptable read the original module's is_available (False
    on a CPU build): every LSTM warned "PyTorch was compiled without cuDNN" under the preflight, and not on a GPU."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        model = nn.LSTM(8, 16, batch_first=True).cuda()  # flatten_parameters asks cuDNN here
        out, _ = model(torch.randn(4, 5, 8, device="cuda"))
        out.sum().backward()
    assert out.device.type == "cuda"
    assert not [w for w in seen if "cuDNN" in str(w.message)]


def test_dataparallel_on_the_one_device(stand_in: Session) -> None:
    model = nn.DataParallel(nn.Linear(4, 2))
    out = model(torch.randn(6, 4))
    assert out.device.type == "cuda"
    out.sum().backward()


def test_save_copy_and_pickle_the_model(stand_in: Session) -> None:
    model = nn.Sequential(nn.Linear(3, 2)).cuda()
    buffer = io.BytesIO()
    torch.save(model, buffer)
    state = io.BytesIO()
    torch.save(model.state_dict(), state)
    clone = copy.deepcopy(model)
    assert clone[0].weight.device.type == "cuda" and clone[0].weight is not model[0].weight
    assert torch.equal(clone[0].weight.cpu(), model[0].weight.cpu())
    assert isinstance(pickle.loads(pickle.dumps(model[0].weight.detach())), torch.Tensor)
    state.seek(0)
    loaded = torch.load(state, map_location="cuda")
    assert loaded["0.weight"].device.type == "cuda"


def test_pickle_round_trips_come_back_where_a_gpu_run_puts_them(stand_in: Session) -> None:
    """pickle.loads(pickle.dumps(x)) of a CUDA tensor or model comes back on its GPU (torch pickles a storage with
    torch.save and reads it with torch.load); on the stand-in it came back on the CPU, and the job's next step failed
    with a device mismatch that a GPU run never has (from the differential tester)."""
    model = nn.Linear(4, 2).cuda()
    on_device = torch.randn(3, device="cuda", requires_grad=True)
    host = torch.randn(5)
    host_bytes = pickle.dumps(host)
    model_back, tensor_back, host_back = pickle.loads(pickle.dumps((model, on_device, host)))
    assert model_back.weight.device == torch.device("cuda", 0) and isinstance(model_back.weight, nn.Parameter)
    assert model_back.weight.requires_grad and model_back.weight is not model.weight
    assert torch.equal(model_back.weight.cpu(), model.weight.cpu())
    assert tensor_back.device.type == "cuda" and tensor_back.requires_grad and tensor_back.is_leaf
    assert torch.equal(tensor_back.detach().cpu(), on_device.detach().cpu())
    assert host_back.device.type == "cpu" and torch.equal(host_back, host)  # a CPU tensor stays on the CPU
    assert pickle.dumps(host) == host_bytes  # what pickle writes for a plain tensor is torch's own
    assert model_back(torch.randn(2, 4, device="cuda")).device.type == "cuda"


def test_checkpoint_written_under_the_preflight_is_plain_cpu_torch(stand_in: Session) -> None:
    model = nn.Linear(3, 2).cuda()
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "whole": model}, buffer)
    stand_in.preflight.finish(stand_in.run)  # the preflight is over: plain torch reads the checkpoint
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert type(loaded["model"]["weight"]) is torch.Tensor
    assert type(loaded["whole"].weight) is nn.Parameter and loaded["whole"].weight.device.type == "cpu"
    stand_in.preflight.start(stand_in.run)  # the fixture finishes it again


def test_a_checkpoint_saved_and_loaded_in_the_run_comes_back_where_a_gpu_run_puts_it(stand_in: Session) -> None:
    """The best model reloaded after training (pytorch/examples word_language_model): torch.load without
    map_location puts cuda tensors back on cuda, so the reloaded model must not land on the CPU; the checkpoint's CPU
    tensors (the RNG state, Adam's step counts) stay on the CPU."""
    model = nn.Linear(4, 2).cuda()
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(3, 4, device="cuda")).sum().backward()
    opt.step()
    whole, checkpoint = io.BytesIO(), io.BytesIO()
    torch.save(model, whole)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": torch.get_rng_state()}, checkpoint)
    whole.seek(0)
    checkpoint.seek(0)
    reloaded = torch.load(whole, weights_only=False)
    loaded = torch.load(checkpoint)
    assert reloaded.weight.device.type == "cuda" and isinstance(reloaded.weight, nn.Parameter)
    assert loaded["model"]["weight"].device.type == "cuda"
    assert loaded["opt"]["state"][0]["exp_avg"].device.type == "cuda"
    assert loaded["opt"]["state"][0]["step"].device.type == "cpu" and loaded["rng"].device.type == "cpu"
    torch.set_rng_state(loaded["rng"])  # a CPU ByteTensor, as torch requires
    assert reloaded(torch.randn(2, 4, device="cuda")).device.type == "cuda"


def test_the_preflight_ends_the_job_at_its_step_budget() -> None:
    from gputriage.collectors.preflight import Preflight
    from gputriage.collectors.runner import StopRun

    probe = FakeProbe()
    preflight = Preflight(probe, stop_after_steps=3)
    preflight._on_step(2)
    with pytest.raises(StopRun):
        preflight._on_step(3)


def test_the_preflights_second_is_the_sum_of_the_sampled_steps_walls_in_the_record() -> None:
    """The window is the record's own number, whatever a clock read in the listener says: a listener before this one
    (the sampler starts at FIRST_SAMPLED_STEP) must not let the record's steps run past the second (CI's failure)."""
    from gputriage.collectors.preflight import Preflight
    from gputriage.collectors.runner import StopRun
    from gputriage.collectors.stack_sampler import FIRST_SAMPLED_STEP
    from gputriage.record.steps import Step

    probe = FakeProbe()
    preflight = Preflight(probe, stop_after_steps=None, min_steps=4)
    walls_s = [5.0] * FIRST_SAMPLED_STEP + [0.25] * 6  # warm-up steps are long and do not count
    stopped = None
    for index, wall_s in enumerate(walls_s):
        probe.steps_section.steps.append(Step(index=index, start_s=0.0, wall_s=wall_s))
        try:
            preflight._on_step(index + 1)
        except StopRun:
            stopped = index + 1
            break
    assert stopped == FIRST_SAMPLED_STEP + 4  # four sampled steps of 0.25 s reach the second, three did not


def test_meta_backing_reads_are_placeholders_with_their_line(meta_stand_in: Session) -> None:
    loss = nn.Linear(4, 1).cuda()(torch.randn(2, 4, device="cuda")).sum()
    assert loss.device.type == "cuda"
    assert loss.item() == 1.0
    assert bool(torch.isnan(loss)) is False
    assert loss.cpu().tolist() == 1.0
    meta_stand_in.preflight.finish(meta_stand_in.run)
    reads = meta_stand_in.run.stand_in.placeholder_reads if meta_stand_in.run.stand_in else []
    assert reads and all(r.where and r.where.endswith(".py:" + r.where.rsplit(":", 1)[1]) for r in reads)
    assert any("test_stand_in_device.py" in (r.where or "") for r in reads)
    meta_stand_in.preflight.start(meta_stand_in.run)


def test_torch_compile_runs_eagerly_and_is_said(stand_in: Session) -> None:
    model = nn.Linear(2, 2).cuda()
    for compiled in (torch.compile(model), torch.compile(mode="reduce-overhead")(model)):
        # what torch.compile returns (a trial's `cm._orig_mod` raised AttributeError: exit 0 became 1), run eagerly
        assert compiled._orig_mod is model and list(compiled.state_dict()) == ["_orig_mod.weight", "_orig_mod.bias"]
        x = torch.randn(3, 2, device="cuda")
        assert torch.equal(compiled(x), model(x))
    assert torch.compile(torch.sin) is torch.sin
    stand_in.preflight.finish(stand_in.run)
    assert stand_in.run.stand_in is not None and stand_in.run.stand_in.compiled_eagerly
    stand_in.preflight.start(stand_in.run)


def test_a_cast_on_the_device_keeps_the_graph(stand_in: Session) -> None:
    w = torch.ones(3, device="cuda", requires_grad=True)
    w.to(device=w.device, dtype=torch.float64).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [1.0, 1.0, 1.0]


def test_default_device_and_to_another_tensor(stand_in: Session) -> None:
    torch.set_default_device("cuda")
    try:
        made = torch.zeros(2)
    finally:
        torch.set_default_device(None)
    assert made.device.type == "cuda"
    host = torch.ones(2)
    assert host.to(made).device.type == "cuda"
    assert made.to(host).device.type == "cpu"
    assert host.type_as(made).device.type == "cuda"
    assert made.type() == "torch.cuda.FloatTensor"
    assert host.type("torch.cuda.DoubleTensor").device.type == "cuda"


def test_data_assignment_moves_values_and_device_as_cuda_does(stand_in: Session) -> None:
    """`w.data = x` (weight init) takes its values; `model.cpu()` (Lightning's teardown) leaves nothing on cuda."""
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3)).to("cuda")
    model[0].weight.data = torch.ones(3, 2, device="cuda")
    assert model[0].weight.device.type == "cuda" and model[0].weight.sum().item() == 6.0
    model(torch.randn(4, 2, device="cuda")).sum().backward()
    grad_sum = model[0].weight.grad.sum().item()
    weight = model[0].weight
    model.cpu()
    assert model[0].weight is weight  # the same object, as nn.Module._apply keeps it on a GPU
    assert {t.device.type for t in [*model.parameters(), *model.buffers()]} == {"cpu"}
    assert weight.grad is not None and weight.grad.device.type == "cpu"
    assert weight.grad.sum().item() == pytest.approx(grad_sum)
    assert weight.sum().item() == 6.0


def test_the_modes_cost_on_the_jobs_other_torch_calls_is_the_stand_ins() -> None:
    """Each torch call of the job's thread passes the preflight's mode, which a GPU run does not pay: a DataLoader over
    a TensorDataset made 136 calls a batch, and its wait under the preflight was 1.8 ms against 0.7 ms. The calls the
    mode sees outside the stand-in's timed compute are counted, and count x the cost measured at the start is the
    stand-in's time, as its compute is: the probes leave it out of the wait and of the step."""
    sessions = session(Backing.CPU)
    s = next(sessions)
    assert STATE.mode_calls == 0  # the start's measurement of the cost is not the job's calls
    STATE.mode_call_s = 1e-6
    rows = torch.zeros(16, 4)
    calls, spent_s = STATE.mode_calls, STATE.spent_s()
    for i in range(10):
        rows[i]  # a host op: only the mode's cost
    assert STATE.mode_calls - calls == 10
    assert STATE.spent_s() - spent_s == pytest.approx(10e-6)
    calls, backing_s = STATE.mode_calls, STATE.backing_s
    y = torch.ones(4, device="cuda") * 2  # two calls: each timed as the stand-in's, the calls inside not counted again
    assert STATE.mode_calls - calls == 2 and STATE.backing_s > backing_s
    assert y.device.type == "cuda"
    with pytest.raises(StopIteration):
        next(sessions)  # finish: the record carries the count and the cost
    assert s.run.stand_in is not None
    assert s.run.stand_in.mode_calls == STATE.mode_calls and s.run.stand_in.mode_call_us == 1.0
    assert s.run.stand_in.stand_in_s == pytest.approx(STATE.backing_s + STATE.mode_calls * 1e-6, abs=1e-6)
