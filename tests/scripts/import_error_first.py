"""A script that dies on a package it lacks before it imports torch (pytorch/examples' gat without `requests`)."""

import a_package_this_machine_lacks  # noqa: F401
import torch

print(torch.zeros(1))
