"""Bring the ladder into the tools people train with: Lightning, Hugging Face `Trainer`, Jupyter.

Each integration is an optional extra (`pip install gputriage[lightning]`, `[hf]`, `[notebook]`) and is imported only
by name (`from gputriage.integrations.lightning import TriageCallback`), so `import gputriage` never imports a
framework. They record with `gputriage.session()` and report with the same renderers as `gputriage run`.
"""
