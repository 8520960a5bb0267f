"""The script reads sys.orig_argv, as tools that re-launch themselves do: under gputriage it showed gputriage's own
command line (`-m gputriage run ...`), not `python orig_argv.py ARGS` (the seventh trial's P17)."""

import sys

print(sys.orig_argv[1:], sys.argv)
