"""Collectors fill the Run record. The only layer (with integrations) that may import torch."""
