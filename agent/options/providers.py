"""`[providers.NAME]` tables of the config file: more endpoints the model picker offers.

```toml
[providers.ollama]
base_url = "http://localhost:11434/v1"
models = ["qwen2.5-coder:14b", "llama3.1:8b"]   # optional: else asked from GET /models

[providers.openrouter]
base_url = "https://openrouter.ai/api/v1"
api_key_env = "OPENROUTER_API_KEY"              # or api_key = "sk-..."
```

Read while the settings are built (before the first `initialize` answer): plain Python only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agent.config import ConfigError, check_base_url

_KEYS = {"base_url", "api_key", "api_key_env", "models"}


@dataclass(frozen=True)
class Provider:
    name: str
    base_url: str
    api_key: str | None = None
    models: tuple[str, ...] = ()  # empty: the endpoint's GET /models says


def parse_providers(value: Any) -> dict[str, Provider]:
    """The `providers` table → providers by name; ConfigError says what is wrong and where."""
    if not isinstance(value, dict):
        raise ConfigError("providers must be a table: [providers.NAME] with base_url = ...")
    providers: dict[str, Provider] = {}
    for name, table in value.items():
        where = f"[providers.{name}]"
        if not name.strip() or "/" in name:
            raise ConfigError(f"{where}: a provider name must be non-empty and without '/'")
        if not isinstance(table, dict):
            raise ConfigError(f"{where} must be a table with base_url (and api_key or models)")
        unknown = sorted(set(table) - _KEYS)
        if unknown:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_KEYS))}"
            )
        base_url = table.get("base_url")
        if not isinstance(base_url, str):
            raise ConfigError(f'{where} needs base_url = "http(s)://..."')
        check_base_url(base_url)
        api_key = table.get("api_key")
        if api_key is not None and not isinstance(api_key, str):
            raise ConfigError(f"{where}: api_key must be a string")
        env = table.get("api_key_env")
        if env is not None:
            if not isinstance(env, str) or not env:
                raise ConfigError(f"{where}: api_key_env must name an environment variable")
            # An unset variable is not an error: a local server needs no key.
            api_key = api_key or os.environ.get(env) or None
        models = table.get("models", [])
        if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
            raise ConfigError(f"{where}: models must be a list of model names")
        providers[name] = Provider(
            name, base_url.rstrip("/"), api_key, tuple(dict.fromkeys(models))
        )
    return providers
