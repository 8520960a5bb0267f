"""Rules for the distributed part of the ladder (see DESIGN.md's finding catalogue)."""

from __future__ import annotations
