"""The name of every GPUTRIAGE_* environment variable, in one module that imports nothing.

The module that reads a variable imports its name from here, and `commands/settings.py` checks every value once
before a command starts, without importing what reads them (the report stack has no place in a job's start-up).
"""

FAKE_NVML = "GPUTRIAGE_FAKE_NVML"  # a fake NVML scenario, for demos and docs
FAKE_JOB_PID = "GPUTRIAGE_FAKE_JOB_PID"  # "self" or a PID: who the fake scenario's job (pid 4242) is
MERGE_WAIT_S = "GPUTRIAGE_MERGE_WAIT_S"  # how long rank 0 waits for the other ranks' records
DDP_COMM_TIMING = "GPUTRIAGE_DDP_COMM_TIMING"  # "0": leave DDP's communication hooks alone
DEMO_DEVICE = "GPUTRIAGE_DEMO_DEVICE"  # the device the demo's script names
REPORT_WORKER = "GPUTRIAGE_REPORT_WORKER"  # "0": do the report's work in the job's process
MAX_RECORD_MB = "GPUTRIAGE_MAX_RECORD_MB"  # the largest record or report.json gputriage reads
PURE_PYTHON = "GPUTRIAGE_PURE_PYTHON"  # "1": read traces without the compiled scanner (tracing/scan.py)
