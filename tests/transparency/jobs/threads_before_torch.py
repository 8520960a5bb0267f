"""The script sets OMP_NUM_THREADS before its own `import torch`, as the docs of many projects tell users to: under
`run --trace` torch was imported by gputriage before the script's first line, and the job got 2 threads for 1 (the
seventh trial's P7)."""

import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"
print("torch imported before the script:", "torch" in sys.modules)
import torch  # noqa: E402

print("threads", torch.get_num_threads())
