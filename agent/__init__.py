"""Heron: a coding agent for the Agent Client Protocol."""

__version__ = "0.1.0"
