"""Settings: command-line flags beat environment variables beat the TOML file beat defaults.

Kept free of heavy imports: this runs before the first answer to `initialize`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

MODES = ("read-only", "ask", "accept-edits", "full-access")
DEFAULT_MODEL = "gpt-4.1"

# Environment variable → setting name.
ENV_VARS = {
    "OPENAI_API_KEY": "api_key",
    "OPENAI_BASE_URL": "base_url",
    "HERON_MODEL": "model",
    "HERON_MODE": "mode",
    "HERON_LOG_LEVEL": "log_level",
    "HERON_LOG_FILE": "log_file",
    "HERON_MAX_TURN_REQUESTS": "max_turn_requests",
    "HERON_DATA_DIR": "data_dir",
    "HERON_CONTEXT_WINDOW": "context_window",
}


class ConfigError(Exception):
    """The settings are unusable; the message says which one and how to fix it."""


@dataclass
class Settings:
    api_key: str | None = None
    base_url: str | None = None
    model: str = DEFAULT_MODEL
    mode: str = "ask"
    max_turn_requests: int = 50
    request_timeout: float = 120.0  # seconds without a byte from the model before giving up
    max_retries: int = 3  # transient model errors (429, 5xx, resets) are retried this often
    max_tool_output_chars: int = 30_000  # what the model reads of one tool result
    log_level: str = "warning"
    log_file: str | None = None
    data_dir: str | None = None  # the session store's directory; default $XDG_DATA_HOME/heron
    context_window: int | None = None  # tokens; default: what the server or a table says
    config_file: str | None = None  # the file the settings were read from, if any

    @property
    def llm_configured(self) -> bool:
        return bool(self.api_key or self.base_url)


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "heron" / "config.toml"


def load_settings(flags: dict[str, Any], config_path: str | None) -> Settings:
    """Merge the three sources. `flags` holds only the flags the user actually gave."""
    values: dict[str, Any] = {}
    path = Path(config_path).expanduser() if config_path else default_config_path()
    if path.is_file():
        values.update(_read_toml(path))
        values["config_file"] = str(path)
    elif config_path:
        raise ConfigError(f"config file not found: {path}")
    for var, name in ENV_VARS.items():
        if os.environ.get(var):
            values[name] = os.environ[var]
    values.update({k: v for k, v in flags.items() if v is not None})
    return _build(values)


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    known = {f.name for f in fields(Settings)} - {"config_file"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} in {path}; known: {', '.join(sorted(known))}"
        )
    return data


_NUMBERS: dict[str, type] = {
    "max_turn_requests": int,
    "request_timeout": float,
    "max_retries": int,
    "max_tool_output_chars": int,
    "context_window": int,
}


def _build(values: dict[str, Any]) -> Settings:
    settings = Settings()
    for name, value in values.items():
        convert = _NUMBERS.get(name, str)
        try:
            setattr(settings, name, convert(value))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"setting {name} must be a number, got {value!r}") from exc
    if settings.mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {settings.mode!r}")
    if settings.max_turn_requests < 1:
        raise ConfigError("max_turn_requests must be at least 1")
    return settings
