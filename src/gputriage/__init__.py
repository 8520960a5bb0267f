"""gputriage: why is my GPU idle while PyTorch trains, and what exactly do I change?"""

from __future__ import annotations

from gputriage.version import __version__

# Nothing but the version at import: the console script starts here, and a Ctrl-C is handled only once
# gputriage.launch runs (typing alone takes 5-10 ms to import). mypy reads the annotations below.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    # `gputriage.session` is imported lazily: `import gputriage` must stay cheap and must not import torch. (It lives
    # in gputriage.api: a submodule named `session` would replace this attribute with itself once imported.)
    if name in ("session", "Session"):
        from gputriage import api

        return getattr(api, name)
    if name == "load_ipython_extension":  # `%load_ext gputriage`; IPython is imported only then
        from gputriage.integrations.notebook import load_ipython_extension

        return load_ipython_extension
    if name == "integrations":  # `gputriage.integrations.lightning.TriageCallback()` after a plain `import gputriage`
        import importlib

        return importlib.import_module("gputriage.integrations")
    raise AttributeError(f"module 'gputriage' has no attribute {name!r}")
