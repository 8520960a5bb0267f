"""Data tables that rules consult (published facts about CUDA, drivers and PyTorch builds), with their sources."""
