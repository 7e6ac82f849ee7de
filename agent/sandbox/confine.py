"""Confine the calling process, layer by layer, as a `confinement` (a plain dict) says.

    {"plan": [...] | null,      Heron's own namespaces and this mount plan (agent.sandbox.plan);
                                null under bubblewrap, which made them already, or without any
     "landlock": {"read": [...], "write": [...], "device": [...]} | null,
     "abi": N,                  the highest Landlock ABI to use (tests emulate older kernels)
     "seccomp": "namespaced" | "landlock-only" | null,
     "capabilities": true,      drop every capability held (a user namespace gives them all; root)
     "limits": {"nproc": N, "data": BYTES, "fsize": BYTES} | null}

Order: namespaces first (the paths Landlock is given are the ones inside them), the limits,
Landlock, the capabilities, then seccomp last (the calls before it are ones it denies).
Standard library only: the zygote and the launcher import it as bare scripts, before they read
anything a command could have written; each layer's module is imported only when a layer asks
for it, and the confinement travels marshalled (`encode`): a zygote outside the sandbox starts
without json or re.
"""

from __future__ import annotations

import importlib
import marshal
import resource
from types import ModuleType
from typing import Any

LIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "data": resource.RLIMIT_DATA,
    "fsize": resource.RLIMIT_FSIZE,
}
DENIED = 126  # a launcher's exit status when it cannot confine (the shell's "cannot execute")


def encode(config: dict[str, Any]) -> str:
    """A confinement as one command-line argument."""
    return marshal.dumps(config).hex()


def decode(text: str) -> dict[str, Any]:
    """The confinement `encode` gave; ValueError if it is not one."""
    try:
        config = marshal.loads(bytes.fromhex(text))
    except (ValueError, EOFError, TypeError) as exc:
        raise ValueError(f"not a confinement: {exc}") from None
    if not isinstance(config, dict):
        raise ValueError("not a confinement")
    return config


def layer(name: str) -> ModuleType:
    """A layer's module: a sibling bare script, or agent.sandbox's when Heron imports this."""
    return importlib.import_module(f"{__package__}.{name}" if __package__ else name)


def confine(config: dict[str, Any]) -> None:
    """Apply every layer `config` names to this process and its future children; raises
    OSError when one cannot be applied (the caller must then run nothing)."""
    if config.get("plan") is not None:
        # Forks: the caller goes on as the first process of the new pid namespace; the
        # parent stays outside, waits for it and exits with its status.
        layer("namespaces").enter(config["plan"])
    set_limits(config.get("limits") or {})
    rules = config.get("landlock")
    if rules is not None:
        layer("landlock").restrict_self(
            rules["read"], rules["write"], rules["device"], highest=int(config.get("abi", 99))
        )
    if config.get("capabilities") and holds_capabilities():
        layer("namespaces").drop_capabilities()
    if config.get("seccomp"):
        layer("seccomp").install(config["seccomp"])


def holds_capabilities() -> bool:
    """Any capability in hand now (root, or a user namespace's first process): without one,
    with no-new-privs set by the other layers, no exec can bring one."""
    with open("/proc/self/status", encoding="ascii", errors="replace") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("CapInh", "CapPrm", "CapEff", "CapAmb") and int(value, 16):
                return True
    return False


def set_limits(limits: dict[str, int]) -> None:
    """Lower the soft and hard limits (never raise them: a lower one set outside stays)."""
    for name, value in limits.items():
        which = LIMITS[name]
        _, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))
