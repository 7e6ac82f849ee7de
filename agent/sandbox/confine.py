"""Confine the calling process, layer by layer, as a `confinement` (a JSON object) says.

    {"plan": [...] | null,      Heron's own namespaces and this mount plan (agent.sandbox.plan);
                                null under bubblewrap, which made them already, or without any
     "landlock": {"read": [...], "write": [...], "device": [...]} | null,
     "abi": N,                  the highest Landlock ABI to use (tests emulate older kernels)
     "seccomp": "namespaced" | "landlock-only" | null,
     "capabilities": true,      drop every capability (a user namespace gives them all)
     "limits": {"nproc": N, "data": BYTES, "fsize": BYTES} | null}

Order: namespaces first (the paths Landlock is given are the ones inside them), the limits,
Landlock, the capabilities, then seccomp last (the calls before it are ones it denies).
Standard library only: the zygote and the launcher import it as bare scripts, before they read
anything a command could have written.
"""

from __future__ import annotations

import resource
from typing import Any

if __package__:  # imported by Heron
    from agent.sandbox import landlock, namespaces, seccomp
else:  # by the zygote or the launcher, bare scripts: their siblings are on sys.path
    import landlock  # type: ignore[import-not-found,no-redef]
    import namespaces  # type: ignore[import-not-found,no-redef]
    import seccomp  # type: ignore[import-not-found,no-redef]

LIMITS = {
    "nproc": resource.RLIMIT_NPROC,
    "data": resource.RLIMIT_DATA,
    "fsize": resource.RLIMIT_FSIZE,
}
DENIED = 126  # a launcher's exit status when it cannot confine (the shell's "cannot execute")


def confine(config: dict[str, Any]) -> None:
    """Apply every layer `config` names to this process and its future children; raises
    OSError when one cannot be applied (the caller must then run nothing)."""
    if config.get("plan") is not None:
        # Forks: the caller goes on as the first process of the new pid namespace; the
        # parent stays outside, waits for it and exits with its status.
        namespaces.enter(config["plan"])
    set_limits(config.get("limits") or {})
    rules = config.get("landlock")
    if rules is not None:
        landlock.restrict_self(
            rules["read"], rules["write"], rules["device"], highest=int(config.get("abi", 99))
        )
    if config.get("capabilities"):
        namespaces.drop_capabilities()
    if config.get("seccomp"):
        seccomp.install(config["seccomp"])


def set_limits(limits: dict[str, int]) -> None:
    """Lower the soft and hard limits (never raise them: a lower one set outside stays)."""
    for name, value in limits.items():
        which = LIMITS[name]
        _, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))
