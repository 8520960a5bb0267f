"""Hardware access. Only `nvml.py` may import NVML (enforced by ruff's banned-api rule)."""
