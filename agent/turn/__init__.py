"""A prompt turn: the loop (loop.py), one model request (model.py), one tool call (calls.py),
asking permission (permission.py) and the updates it sends (updates.py). Whether a prompt is
a slash command or a turn is decided above it (`agent.app.prompt`)."""

from __future__ import annotations

from agent.turn.loop import Turn

__all__ = ["Turn"]
