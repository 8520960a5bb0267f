"""A folder run as `python foldered`: Python runs its __main__.py with the folder first on sys.path."""

import sys

import torch
from stepper import run

print("path0 is the folder", sys.path[0].endswith("foldered"), "argv0", sys.argv[0])
print("losses", run(torch))
