"""A job that deletes `sys.stdout` once it is done with it (trial 9's P3): Python ends it with exit code 0; gputriage's
own flush of the streams raised AttributeError, the exit code became 1 and the report was lost."""

import sys

print("done", flush=True)
del sys.stdout
print("stdout gone", file=sys.stderr)
