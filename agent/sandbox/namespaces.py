"""STUB until the userns24 branch lands (Heron's own namespaces)."""

from __future__ import annotations

from typing import Any


def available() -> str | None:
    return "Heron's own namespaces are not built yet"


def enter(plan: list[Any]) -> None:
    raise OSError(0, "Heron's own namespaces are not built yet")


def drop_capabilities() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP
