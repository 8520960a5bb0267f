"""The finding catalogue: every code gputriage can report, its rung, its severities, what it means and the evidence it
carries. Codes are stable: add new ones, never rename one.

This table is the contract's source: `docs/contract.md` is generated from it, and the tests check that every code a
rule can emit is here with the right rung, that the severities and evidence fields a real finding carries are the ones
declared, and that the page and the table agree.
"""

from __future__ import annotations

import msgspec


class Entry(msgspec.Struct, frozen=True):
    code: str
    rung: int
    severities: tuple[str, ...]  # critical | warning | info, the ones this code can take
    meaning: str
    evidence: tuple[str, ...]  # the evidence fields it can carry (a finding carries a subset)


# Evidence that the diagnosis may add to any finding: the ranks a collapsed finding was seen on, and NVML's numbers
# cited on the finding that explains an idle GPU.
COMMON_EVIDENCE = (
    "on_ranks",
    "nvml_gpu",
    "nvml_gpu_util_mean_pct",
    "nvml_gpu_util_zero_pct_of_samples",
    "nvml_gpu_util_samples",
)

CATALOGUE: tuple[Entry, ...] = (
    Entry(
        "torch-not-installed",
        1,
        ("critical",),
        "PyTorch cannot be imported",
        ("import_error", "python", "torch_version"),
    ),
    Entry(
        "no-gpu-visible",
        1,
        ("critical", "warning", "info"),
        (
            "no GPU device reachable at all: no device nodes, NVML finds nothing. When a GPU is meant, this is "
            "the root cause, and `cpu-only-build` is at most info; a warning on an Apple silicon Mac whose x86_64 "
            "Python runs under Rosetta (torch sees macOS 10.16: MPS unavailable or cut short)"
        ),
        (
            "container",
            "error",
            "nvidia_device_nodes",
            "nvml_error",
            "nvml_gpus",
            "os",
            "other_gpus",
            "other_user_works",
            "rosetta",
            "pci_nvidia_gpus",
            "torch_cuda_devices",
        ),
    ),
    Entry(
        "mps-unavailable",
        1,
        ("critical",),
        (
            "on a Mac, the job is meant for Apple's GPU (MPS) and torch cannot use it: a torch older than 1.12, a "
            "build without MPS, or a macOS older than the release needs (12.3 for 1.12-2.4, 13.0 for 2.5-2.9, 14.0 "
            "from 2.10; torch's own error has named an older one)"
        ),
        ("error_says_macos", "macos_needed", "macos_version", "mps_available", "mps_built", "torch_version"),
    ),
    Entry(
        "container-without-gpu",
        1,
        ("critical", "info"),
        "inside a container started without GPU access (`--gpus` / the container toolkit), when a GPU was meant",
        (
            "container",
            "cuda_available",
            "gpu_flag_given",
            "nvidia_device_nodes",
            "NVIDIA_VISIBLE_DEVICES",
            "pci_nvidia_gpus",
            "why",
        ),
    ),
    Entry(
        "driver-not-loaded",
        1,
        ("critical", "info"),
        "an NVIDIA device is on the PCI bus, but no driver / NVML is loaded",
        (
            "error",
            "gpu",
            "message",
            "nvidia_device_nodes",
            "nvml_error",
            "pci_nvidia_gpus",
            "secure_boot",
            "torch_version",
            "xpu_available",
        ),
    ),
    Entry(
        "driver-library-mismatch",
        1,
        ("critical", "info"),
        'NVML "Driver/library version mismatch": the driver was upgraded without a reboot',
        ("kernel_module_version", "library_version", "nvml_error", "rebooted"),
    ),
    Entry(
        "cpu-only-build",
        1,
        ("critical", "warning", "info"),
        (
            "torch was built without CUDA (`+cpu`, conda `cpuonly`, a Windows PyPI wheel) while a GPU is present;"
            " the fix is the exact install command for this Python and driver"
        ),
        (
            "companions",
            "conda_cpuonly_installed",
            "driver_cuda",
            "driver_version",
            "evidence",
            "gpu",
            "gpus",
            "install_method",
            "message",
            "torch_cuda",
            "torch_version",
            "xpu_available",
        ),
    ),
    Entry(
        "driver-too-old",
        1,
        ("critical", "warning", "info"),
        "the driver is older than the minimum that torch's CUDA runtime needs (or, in a pasted report, a torch built "
        "with an older CUDA major version reaches the GPU where one built with a newer does not: `working_torch`)",
        (
            "cuda_error",
            "driver_cuda",
            "driver_version",
            "message",
            "min_driver_for_torch_cuda",
            "torch_cuda",
            "torch_cuda_from",
            "working_torch",
            "working_torch_cuda",
            "wsl_kernel",
        ),
    ),
    Entry(
        "cuda-visible-devices",
        1,
        ("critical", "warning", "info"),
        "`CUDA_VISIBLE_DEVICES` hides the GPUs: empty, `-1`, an index or UUID that does not exist",
        (
            "CUDA_VISIBLE_DEVICES",
            "cuda_error",
            "entries",
            "entries_cuda_ignores",
            "gpus_cuda_will_see",
            "gpus_on_machine",
            "torch_cuda_devices",
            "torch_version",
        ),
    ),
    Entry(
        "arch-not-supported",
        1,
        ("critical", "info"),
        (
            "the GPU's compute capability `sm_XY` is not in `torch.cuda.get_arch_list()`; several GPUs named in a "
            "report whose build's list is not known: each is named (`gpus_named`), with the check that tells"
        ),
        (
            "build_arch_list",
            "build_arch_list_from",
            "build_with_kernels",
            "compute_capability",
            "cuda_error",
            "gpu",
            "gpus_named",
            "gpus_with_kernels",
            "message",
            "min_capability",
            "raised_in",
            "torch_cuda",
            "torch_version",
        ),
    ),
    Entry(
        "cuda-init-failed",
        1,
        ("critical", "warning", "info"),
        (
            "CUDA initialisation fails with a known error (802 fabric manager, 804 forward compatibility, 999 "
            "after suspend, ...): the error is named and explained"
        ),
        (
            "available_elsewhere",
            "available_without_it",
            "compute_mode",
            "cuda_error",
            "driver_cuda",
            "driver_version",
            "error_name",
            "failing_command",
            "gpu_names",
            "gpus",
            "init_message",
            "initialised_first_by",
            "lost_gpus",
            "message",
            "mig_enabled_gpus",
            "nvml_error",
            "source",
            "torch_cuda",
            "torch_is_available",
            "torch_version",
            "wsl",
        ),
    ),
    Entry(
        "data-on-cpu",
        2,
        ("critical",),
        "inputs or labels reach the model or the loss on the CPU. When the script's device choice was the CPU (a flag "
        'left at "cpu", or a framework call such as `Trainer(accelerator="cpu")`), `device_chosen_at` names that line '
        "and the fix changes the choice instead of adding moves",
        (
            "cpu_shape",
            "crash_module",
            "crash_where",
            "crashed_with",
            "device_chosen_at",
            "device_chosen_by",
            "edits",
            "expected_device",
            "host_tensor",
            "host_tensor_made_where",
            "host_tensor_where",
            "inputs_off_device",
            "labels_off_device",
            "tensors",
        ),
    ),
    Entry(
        "missing-distributed-sampler",
        2,
        ("warning",),
        "under DDP every rank iterates the whole dataset",
        (
            "dataset_len",
            "expected_samples_per_rank_per_epoch",
            "sampler_class",
            "samples_per_rank_per_epoch",
            "world_size",
        ),
    ),
    Entry(
        "device-in-loader-worker",
        2,
        ("critical",),
        "a DataLoader worker process makes or moves a tensor onto the GPU (`.to(device)` or `device=` in "
        '`Dataset.__getitem__`): CUDA cannot run in a forked worker, and the job dies with "Cannot re-initialize '
        'CUDA in forked subprocess"; the fix keeps `__getitem__` on the CPU and moves the batch in the loop',
        ("crash_where", "error", "worker_where"),
    ),
    Entry(
        "cpu-run",
        2,
        ("info",),
        "there is no accelerator at all: rungs 2-5 describe a CPU run",
        ("expected_device",),
    ),
    Entry(
        "model-on-cpu",
        3,
        ("critical", "info"),
        "the model's parameters are on the CPU while the job should use the accelerator (`device_chosen_at`: as for "
        "data-on-cpu)",
        (
            "crash_module",
            "crash_where",
            "crashed_with",
            "device_chosen_at",
            "device_chosen_by",
            "edits",
            "elements_per_device",
            "expected_device",
            "first_forward_where",
            "held_in",
            "model",
            "parameter_count",
        ),
    ),
    Entry(
        "model-partly-on-cpu",
        3,
        ("critical", "info"),
        "some submodules, parameters or buffers stay on the CPU",
        (
            "crash_module",
            "crash_where",
            "crashed_with",
            "edits",
            "expected_device",
            "model",
            "moved_where",
            "steps_completed",
            "stray_elements",
            "stray_parts",
            "stray_pct",
        ),
    ),
    Entry(
        "device-mismatch-error",
        3,
        ("critical",),
        (
            'the script died with "Expected all tensors to be on the same device"; names which tensor and which '
            "module, when no more specific code applies. Also before any crash, when the op census saw a CPU tensor "
            "(a tensor made inside forward without `device=`) meet the device's tensors in one op: CUDA fails there, "
            "the meta stand-in may not"
        ),
        (
            "cpu_shape",
            "cpu_tensor_where",
            "devices",
            "edits",
            "error",
            "host_tensor",
            "host_tensor_made_where",
            "host_tensor_owner_where",
            "host_tensor_where",
            "mixed_ops",
            "module",
            "op",
            "op_where",
            "window_steps",
        ),
    ),
    Entry(
        "no-gpu-compute",
        4,
        ("critical",),
        "the training steps ran no op or kernel on the accelerator (`device_chosen_at`: as for data-on-cpu)",
        (
            "cpu_ops",
            "device_chosen_at",
            "device_chosen_by",
            "expected_device",
            "gpu_events",
            "launch_calls",
            "op_time_s_per_device",
            "ops_per_device",
            "step_time_us",
            "steps",
            "window_steps",
        ),
    ),
    Entry(
        "cpu-compute-in-step",
        4,
        ("warning", "info"),
        (
            "a large share of the step's time runs on the CPU: a loss, metrics or augmentation on CPU tensors (the op "
            "census), or NumPy, PIL and Python loops at one line of the user's code (the stack sampler), with the "
            "line's share of the step and its 90% interval (on a preflight's stand-in, the least share it can have "
            "of a GPU step, whose compute runs on the device beside the host). Info when borderline"
        ),
        (
            "cpu_compute_pct_of_steps",
            "cpu_compute_us",
            "cpu_op_pct_of_step",
            "cpu_op_time_per_step_s",
            "cpu_ops",
            "cpu_time_per_step_s",
            "function",
            "gpu_idle_during_pct",
            "gpu_idle_during_us",
            "hottest_line_inside",
            "library",
            "line_pct_of_gpu_step_min",
            "line_pct_of_host_step",
            "line_pct_interval_90",
            "line_pct_of_step",
            "samples",
            "samples_at_line",
            "steps_sampled",
            "top_ops",
            "window_steps",
        ),
    ),
    Entry(
        "host-sync-in-loop",
        4,
        ("warning", "info"),
        (
            "the step blocks on the device every iteration: `.item()`, `.cpu()`, `print(tensor)`, "
            "`cudaStreamSynchronize`; where and how long. From a trace, `sync_calls` counts the sync calls and the "
            "device-to-host copies that block the host (`blocking_copy_calls` of them)"
        ),
        (
            "autotune_pct",
            "blocking_copy_calls",
            "blocking_us",
            "edits",
            "idle_after_sync_pct",
            "idle_after_sync_us",
            "sites",
            "sync_calls",
            "sync_calls_per_step",
            "sync_pct_of_step",
            "sync_time_per_step_s",
            "syncs_per_step",
            "top_call",
            "top_op",
        ),
    ),
    Entry(
        "launch-blocking",
        4,
        ("warning",),
        (
            "CUDA_LAUNCH_BLOCKING=1 in the job's environment: every kernel launch waits for the kernel, so the host "
            "cannot queue work ahead; the line that sets it, when the job does"
        ),
        ("edits", "launch_blocking", "set_by", "set_where"),
    ),
    Entry(
        "cudnn-autotuner",
        4,
        ("info",),
        (
            "cuDNN's settings do not fit the convolutions the steps ran: held to deterministic algorithms "
            "(`cudnn.deterministic`, `use_deterministic_algorithms`), the autotuner (`cudnn.benchmark`) off while "
            "the input shapes stay fixed, or on while they change every step"
        ),
        (
            "conv_calls_per_step",
            "conv_input_shapes",
            "cudnn_benchmark",
            "cudnn_deterministic",
            "set_where",
            "steps",
        ),
    ),
    Entry(
        "launch-bound",
        4,
        ("warning", "info"),
        (
            'the GPU waits for the CPU to launch many short kernels (info, led by "From 1 step only", where the '
            "trace is too thin to judge a share of its time, or where the GPU is busy enough)"
        ),
        (
            "busy_pct",
            "host_wait_pct_of_idle",
            "idle_in_short_gaps_pct_of_window",
            "kernels",
            "kernels_per_step",
            "median_kernel_us",
            "median_launch_us",
            "short_kernel_pct",
        ),
    ),
    Entry(
        "pageable-memcpy",
        4,
        ("warning", "info"),
        "host-to-device copies from pageable memory (`pin_memory=False`)",
        (
            "pageable_h2d_bytes",
            "pageable_h2d_count",
            "pageable_h2d_pct_of_window",
            "pageable_h2d_us",
            "pinned_h2d_count",
        ),
    ),
    Entry(
        "placeholder-values",
        4,
        ("info",),
        "on the meta stand-in, host reads (`.item()`, `bool()`, `.tolist()`) got placeholder values: control flow "
        "that depends on them may differ from a real run",
        ("placeholder", "reads", "sites"),
    ),
    Entry(
        "input-pipeline-bound",
        5,
        ("critical", "warning", "info"),
        (
            "the step waits for the DataLoader: the share of the step spent waiting for data over the steps after "
            "warm-up, with its 90% interval, the loader's `num_workers`/`pin_memory`, its measured load time per batch "
            "against the step's own work, and the fix; from a trace without step marks, the GPU's idle time in the "
            "DataLoader among the 10 longest gaps, as a share of the window. Info when borderline: too few steps, an "
            "interval that reaches below the threshold, or, under a preflight, a wait under the GPU host's 2 ms floor "
            "once the stand-in's cost in it is left out twice"
        ),
        (
            "batch_device",
            "batch_load_cpu_s",
            "batch_load_s",
            "batch_load_source",
            "batch_size",
            "busy_pct_of_steps",
            "cpu_count",
            "data_wait_pct_interval_90",
            "data_wait_pct_of_step",
            "data_wait_s_per_step",
            "dataloader_idle_pct_of_window",
            "dataloader_idle_us",
            "dataloader_pct_of_step",
            "dataloader_us_per_step",
            "dataset",
            "edits",
            "iterable_dataset",
            "loader_hot_line",
            "num_workers",
            "of_10_longest_gaps_in_dataloader",
            "persistent_workers",
            "pin_memory",
            "preflight_stand_in_wait_s_per_step",
            "preflight_wait_floor_s_per_step",
            "step_s",
            "step_time_us",
            "step_work_s",
            "steps",
            "steps_measured",
            "steps_window",
            "window_us",
            "workers_needed",
        ),
    ),
    Entry(
        "device-compared-to-string",
        3,
        ("warning", "info"),
        (
            'the script compares a torch.device with a string (`if device == "cuda":`), which is never equal: the '
            "branch for that device never runs (or always does, with `!=`); the line with `.type` is the fix"
        ),
        ("comparison", "device_variable", "edits"),
    ),
    Entry(
        "eval-loader-bound",
        5,
        ("warning",),
        (
            "an evaluation pass between training steps waits for its own DataLoader (batches fetched with no backward "
            "between them, or under no_grad, while another loader trains) for a large share of the measured time: "
            "its wait, batches and settings, and the fix at that loader's line"
        ),
        (
            "batch_size",
            "cpu_count",
            "dataset",
            "edits",
            "eval_batch_s",
            "eval_batches",
            "eval_wait_pct_of_steps",
            "eval_wait_s",
            "num_workers",
            "persistent_workers",
            "pin_memory",
            "steps_measured",
        ),
    ),
    Entry(
        "low-gpu-utilization",
        5,
        ("warning", "info"),
        "measured GPU busy time is low (of the steps' time when a trace marks steps, else of the profiled window) "
        "and no lower finding explains at least half of the idle time; info from a trace that marks too few steps "
        "(fewer than 3), whose verdict is then inconclusive",
        (
            "busy_pct",
            "busy_pct_of_steps",
            "command",
            "dram_active_mean_pct",
            "gpu",
            "gpu_name",
            "idle_pct",
            "long_gap_activity_us",
            "long_gaps",
            "long_gaps_pct_of_window",
            "longest_gaps",
            "main_thread_in_gaps",
            "meaning",
            "pid",
            "sm_active_mean_pct",
            "sm_occupancy_mean_pct",
            "tensor_active_mean_pct",
            "used_memory_bytes",
            "util_below_50_pct_of_samples",
            "util_mean_pct",
            "util_sample_count",
            "util_source",
            "util_zero_pct_of_samples",
            "window_s",
            "window_us",
        ),
    ),
    Entry(
        "gpus-idle-in-process",
        5,
        ("warning", "info"),
        'one process\' trace holds device events of several GPUs (device_map="auto", a model split by hand): warning '
        "when some GPU ran under 10% of the busiest one's device time (they wait while it works), or when the pooled "
        "busy share passes 50% while every GPU's own time covers under 50% of the window (they take turns); info "
        "otherwise (the busy share pools the GPUs)",
        ("busy_pct", "device_pct_of_window", "device_time_ms", "devices", "idle_devices"),
    ),
    Entry(
        "gpu-memory-nearly-full",
        5,
        ("warning", "info"),
        "the GPU's memory is nearly full",
        (
            "gpu",
            "gpu_name",
            "job_memory_max_bytes",
            "memory_total_bytes",
            "memory_used_max_bytes",
            "memory_used_max_pct",
            "other_processes_memory_bytes",
        ),
    ),
    Entry(
        "gpu-throttled",
        5,
        ("warning", "info"),
        "the GPU's clocks are held down (power cap, thermal slowdown)",
        (
            "clock_pct_of_max",
            "gpu",
            "gpu_name",
            "max_sm_clock_mhz",
            "power_limit_w",
            "power_mean_w",
            "reason",
            "reasons_pct_of_samples",
            "sm_clock_mean_mhz",
            "t_s",
            "temperature_max_c",
            "throttled_pct_of_samples",
        ),
    ),
    Entry(
        "other-process-on-gpu",
        5,
        ("warning", "info"),
        "another process holds memory or SMs on the job's GPU",
        ("command", "gpu", "job_memory_bytes", "memory_pct_of_gpu", "pid", "sm_util_pct", "used_memory_bytes"),
    ),
    Entry(
        "ranks-share-gpu",
        5,
        ("critical",),
        "several ranks use the same GPU while others sit idle (e.g. everything on `cuda:0`)",
        ("device_by_rank", "gpus_idle", "gpus_on_node", "node", "nvml_processes_by_gpu", "ranks_by_device"),
    ),
    Entry(
        "stray-context-on-gpu",
        5,
        ("warning",),
        "rank k allocates memory on another rank's GPU (`torch.load` without `map_location`, no `set_device`)",
        ("device", "stray_bytes", "torch_load_without_map_location"),
    ),
    Entry(
        "straggler-rank",
        5,
        ("warning",),
        "one rank is late to the collectives, and why: its own lower finding",
        (
            "busy_pct_max",
            "busy_pct_min",
            "cause_code",
            "cause_phase",
            "cause_phase_excess_s_per_step",
            "collective_lag_us",
            "collective_wait_s_per_step_by_rank",
            "collectives_compared",
            "lag_pct_of_step",
            "lateness_s_per_step",
            "others_collective_wait_s_per_step",
            "own_work_s_per_step_by_rank",
            "ranks_given",
            "reason_code",
            "reason_evidence",
            "step_time_spread_pct",
            "step_wall_s",
            "steps_compared",
            "straggler_rank",
            "world_size",
        ),
    ),
    Entry(
        "communication-bound",
        5,
        ("warning", "info"),
        "the GPU runs collectives (NCCL, RCCL, gloo) with no compute kernel beside them for a large share of the step "
        "(of the profiled window without step marks): GPU busy counts those kernels, so utilization looks fine while "
        "the job waits on the network or another rank. Info from 10%, or from too few steps",
        (
            "backend",
            "busy_pct",
            "comm_kernels",
            "compute_pct",
            "exposed_comm_pct_of_steps",
            "exposed_comm_pct_of_window",
            "overlap_pct",
            "steps",
            "world_size",
        ),
    ),
    Entry(
        "gloo-with-cuda",
        5,
        ("warning",),
        "the process group uses gloo for CUDA tensors where nccl is meant",
        ("backend", "device", "world_size"),
    ),
    Entry(
        "dataparallel-not-ddp",
        5,
        ("warning", "info"),
        "`nn.DataParallel` on several GPUs, where DistributedDataParallel is meant (info: over one GPU or none, a "
        "wrapper with no speed-up)",
        ("device_ids", "gpu_count", "module_class"),
    ),
)

BY_CODE = {entry.code: entry for entry in CATALOGUE}
