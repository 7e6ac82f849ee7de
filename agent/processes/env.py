"""The environment of the commands Heron runs and the MCP servers it starts: Heron's own,
minus the credentials Heron holds.

A command's output reaches the model (`env`, `printenv`, a crash dump), so the model's API key
and every provider key must not be in it: OPENAI_API_KEY, any HERON_* variable that names a
key, token, secret or password, and any variable whose value is a key Heron holds (from the
environment or the config file, `[providers.NAME]` included). `pass_env` lists the variables
the user wants passed through anyway.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

ALWAYS = frozenset(("OPENAI_API_KEY",))
_SECRET_HERON = re.compile(r"^HERON_.*(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)
# A variable that looks like a credential (GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, NPM_TOKEN,
# DATABASE_PASSWORD, …): a command auto mode runs unasked gets none of them (it has no network
# to use one, and its output reaches the model).
_CREDENTIAL = re.compile(
    r"(^|_)(KEY|APIKEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH|COOKIE|PAT|PRIVATE)"
    r"(_|$)",
    re.IGNORECASE,
)


def held_keys(settings: Any) -> set[str]:
    """The credentials Heron holds: the model's key and every provider's."""
    keys = {getattr(settings, "api_key", None)}
    for provider in (getattr(settings, "providers", None) or {}).values():
        keys.add(provider.api_key)
    return {key for key in keys if key}


def withheld(
    settings: Any, environ: Mapping[str, str] | None = None, sandboxed: bool = False
) -> list[str]:
    """The names of the variables of `environ` that hold a credential and are not passed:
    Heron's own, and for a sandboxed command every one that looks like a credential."""
    environ = os.environ if environ is None else environ
    keys = held_keys(settings)
    passed = set(getattr(settings, "pass_env", ()) or ())
    return [
        name
        for name, value in environ.items()
        if name not in passed
        and (
            name in ALWAYS
            or _SECRET_HERON.match(name)
            or (value and value in keys)
            or (sandboxed and _CREDENTIAL.search(name))
        )
    ]


def command_env(
    settings: Any, environ: Mapping[str, str] | None = None, sandboxed: bool = False
) -> dict[str, str]:
    """`environ` (Heron's environment) without the credentials it holds (`sandboxed`: without
    any variable that looks like one, unless `pass_env` names it)."""
    environ = os.environ if environ is None else environ
    hidden = set(withheld(settings, environ, sandboxed))
    return {name: value for name, value in environ.items() if name not in hidden}


def passed_through(settings: Any, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The `pass_env` variables that are set: what an MCP server gets on top of the SDK's
    short list of safe variables and the `env` the client gave for it."""
    environ = os.environ if environ is None else environ
    names = getattr(settings, "pass_env", ()) or ()
    return {name: environ[name] for name in names if name in environ}
