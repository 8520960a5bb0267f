"""The families of trace events that pass one tells apart, by category (both decode paths share them)."""

RUNTIME, CPU_OP, ANNOTATION, PYTHON, SKIP, DEVICE = range(6)
CPU_FAMILIES = (CPU_OP, ANNOTATION, PYTHON)

# Event families. GPU work is recognised as HTA does, by an `args.stream` on a timed event (so MTIA and AMD
# devices count too), except for the categories below, which carry a stream but are not device work.
CATEGORY_FAMILY = {
    "cuda_runtime": RUNTIME,
    "runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "mtia_runtime": RUNTIME,
    "privateuse1_runtime": RUNTIME,
    "cpu_op": CPU_OP,
    "operator": CPU_OP,
    "user_annotation": ANNOTATION,
    "python_function": PYTHON,
    "gpu_user_annotation": SKIP,
    # Kineto's "Stream Sync" / "Event Sync" / "Context Sync" marks on a GPU lane: the span the device's queue waited
    # for the host's sync call, not work it ran (HTA leaves them out of busy and idle time too)
    "cuda_sync": SKIP,
    "trace": SKIP,
    # CUPTI's own bookkeeping on pid -1 ("Activity Buffer Request", "Instrumentation", "Resource"): the profiler's
    # overhead, no stream, no device work; counted as unread device events, they read as kernels lost (trial 10)
    "overhead": SKIP,
    "ac2g": SKIP,
    "fwdbwd": SKIP,
    "async": SKIP,
}
