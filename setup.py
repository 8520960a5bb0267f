"""The one compiled module: the trace scanner (src/gputriage/tracing/_scan.c), built when a C compiler is there.

`optional=True`: without a compiler (or Python's headers) the build says so and goes on, and gputriage runs every
trace on its pure-Python path (src/gputriage/tracing/scan.py), slower and with the same results. Everything else
about the package is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "gputriage.tracing._scan",
            ["src/gputriage/tracing/_scan.c"],
            optional=True,
        )
    ]
)
