"""Settings: command-line flags beat environment variables beat the TOML file beat defaults.

Kept free of heavy imports: this runs before the first answer to `initialize`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

MODES = ("read-only", "ask", "auto", "accept-edits", "full-access")
# How the model calls tools: the API's `tools` parameter, `<tool_call>` blocks in its text
# (agent.textcalls), or native until the server shows it cannot take tools.
TOOL_CALL_MODES = ("auto", "native", "text")
DEFAULT_MODEL = "gpt-4.1"
MAX_TOOL_OUTPUT_CHARS = 30_000  # what the model reads of one tool result, unless set

# Environment variable → setting name.
ENV_VARS = {
    "OPENAI_API_KEY": "api_key",
    "OPENAI_BASE_URL": "base_url",
    "HERON_MODEL": "model",
    "HERON_MODE": "mode",
    "HERON_LOG_LEVEL": "log_level",
    "HERON_LOG_FILE": "log_file",
    "HERON_MAX_TURN_REQUESTS": "max_turn_requests",
    "HERON_MAX_TOKENS": "max_tokens",
    "HERON_MCP_STARTUP_TIMEOUT": "mcp_startup_timeout",
    "HERON_DATA_DIR": "data_dir",
    "HERON_CONTEXT_WINDOW": "context_window",
    "HERON_PASS_ENV": "pass_env",
    "HERON_TOOL_CALLS": "tool_calls",
}


# Settings a command-line flag sets (`--base-url` → base_url), for `heron` and `heron exec` (which
# hands the ones it takes to the agent it starts): argparse keywords, without importing argparse.
FLAGS: dict[str, dict[str, Any]] = {
    "model": {"help": "model name, e.g. gpt-4.1 or qwen2.5-coder:7b"},
    "base_url": {"help": "OpenAI-compatible endpoint URL"},
    "mode": {"choices": MODES, "help": "permission mode (default: ask)"},
    "max_turn_requests": {
        "type": int,
        "help": "model requests allowed per prompt turn (default: 50)",
    },
    "max_tokens": {"type": int, "help": "output tokens per model answer (default: the server's)"},
    "config": {"help": "TOML config file (default: ~/.config/heron/config.toml)"},
    "log_level": {"choices": ["debug", "info", "warning", "error"], "help": "stderr log level"},
    "log_file": {"help": "also write logs to this file"},
    "data_dir": {
        "help": "where sessions are stored (default: $XDG_DATA_HOME/heron, ~/.local/share/heron)"
    },
    "context_window": {
        "type": int,
        "help": "the model's context window in tokens (default: asked from the server)",
    },
    "tool_calls": {
        "choices": TOOL_CALL_MODES,
        "help": "how the model calls tools: native (the API's tools parameter), text "
        "(<tool_call> blocks in its answer) or auto (native, text when the server cannot; "
        "the default)",
    },
}


def add_flags(parser: Any, names: Iterable[str] = FLAGS) -> None:
    """Add the flags `names` (setting names, see FLAGS) to an argparse parser."""
    for name in names:
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, **FLAGS[name])


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
    max_tool_output_chars: int = MAX_TOOL_OUTPUT_CHARS
    # Output tokens per model answer; sent only when set. A local model that never stops
    # would otherwise hold the turn until its context is full.
    max_tokens: int | None = None
    reasoning_effort: str | None = None  # sent only when set (low, medium, high)
    mcp_startup_timeout: float = 10.0  # seconds a prompt waits for MCP servers still starting
    log_level: str = "warning"
    log_file: str | None = None
    data_dir: str | None = None  # the session store's directory; default $XDG_DATA_HOME/heron
    context_window: int | None = None  # tokens; default: what the server or a table says
    # Variables commands and MCP servers may inherit although they hold a credential Heron
    # holds (agent.processes.env); TOML: a list of names, environment: comma-separated.
    pass_env: tuple[str, ...] = ()
    tool_calls: str = "auto"  # one of TOOL_CALL_MODES
    # Limits of a command auto mode runs unasked (agent.sandbox; 0: none): processes of the
    # sandbox, memory of one process (MB; default: half the machine's), size of a file (MB).
    sandbox_max_processes: int = 4096
    sandbox_max_memory_mb: int | None = None
    sandbox_max_file_mb: int = 16384
    # "named": the model is the configured one (or OpenAI's default); "unnamed": a server was
    # given without a model, so `model` is "" until agent.options.unnamed takes the server's
    # only model ("server") or the prompt says one must be named. Never read from the file.
    model_source: str = "named"
    config_file: str | None = None  # the file the settings were read from, if any
    # More endpoints for the model picker: `[providers.NAME]` tables (parse_providers).
    providers: dict[str, Provider] = field(default_factory=dict)
    # Why the configured settings could not be used. The agent still answers the editor (so it
    # can show the reason) and explains this at the first prompt instead of dying unheard.
    problem: str | None = None

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
    settings = _build(values)
    if settings.base_url and "model" not in values and not _is_openai(settings.base_url):
        # OpenAI's default model means nothing to another server (a local one above all).
        settings.model, settings.model_source = "", "unnamed"
    return settings


def _is_openai(base_url: str) -> bool:
    from urllib.parse import urlsplit

    return urlsplit(base_url).hostname == "api.openai.com"


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    known = {f.name for f in fields(Settings)} - {"config_file", "problem", "model_source"}
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
    "max_tokens": int,
    "mcp_startup_timeout": float,
    "context_window": int,
    "sandbox_max_processes": int,
    "sandbox_max_memory_mb": int,
    "sandbox_max_file_mb": int,
}


def _build(values: dict[str, Any]) -> Settings:
    settings = Settings()
    for name, value in values.items():
        if name == "providers":
            settings.providers = parse_providers(value)
            continue
        if name == "pass_env":
            settings.pass_env = _names(value)
            continue
        convert = _NUMBERS.get(name, str)
        try:
            setattr(settings, name, convert(value))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"setting {name} must be a number, got {value!r}") from exc
    if settings.mode not in MODES:
        raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {settings.mode!r}")
    if settings.tool_calls not in TOOL_CALL_MODES:
        raise ConfigError(
            f"tool_calls must be one of {', '.join(TOOL_CALL_MODES)}, got {settings.tool_calls!r}"
        )
    if settings.context_window is not None and settings.context_window < 1:
        raise ConfigError("context_window must be at least 1")
    if settings.max_turn_requests < 1:
        raise ConfigError("max_turn_requests must be at least 1")
    if settings.base_url is not None:
        check_base_url(settings.base_url)
    if settings.max_tokens is not None and settings.max_tokens < 1:
        raise ConfigError("max_tokens must be at least 1")
    for name in ("sandbox_max_processes", "sandbox_max_memory_mb", "sandbox_max_file_mb"):
        if (getattr(settings, name) or 0) < 0:
            raise ConfigError(f"{name} must be 0 (no limit) or more")
    if not settings.mcp_startup_timeout > 0:
        raise ConfigError("mcp_startup_timeout must be a positive number of seconds")
    return settings


def _names(value: Any) -> tuple[str, ...]:
    """`pass_env`: a list of variable names (TOML), or the names separated by commas."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"pass_env must be a list of variable names, got {value!r}")
    return tuple(name.strip() for name in value if name.strip())


def check_base_url(url: str) -> None:
    """An endpoint without a scheme would be read as a relative path by the HTTP client."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"base_url must be a full URL starting with http:// or https://, got {url!r} "
            f"(for example http://{url.split('://')[-1] or 'localhost:11434/v1'})"
        )


def broken_settings(problem: str) -> Settings:
    """What the agent runs with when its settings are unusable: defaults, and the reason."""
    return Settings(problem=problem)


def config_path(explicit: str | None = None) -> Path:
    """The config file in use: --config, else HERON_CONFIG, else the XDG default."""
    chosen = explicit or os.environ.get("HERON_CONFIG")
    return Path(chosen).expanduser() if chosen else default_config_path()


def update_config_file(path: Path, values: dict[str, str | int | float]) -> None:
    """Set top-level keys of a TOML config file, keeping its other lines (keys, comments).

    The file may hold an API key: it is written owner-only (0600) and atomically (a temporary
    file in the same directory, then rename), so a crash leaves the old file or the new one.
    """
    import json
    import re
    import tomllib

    lines: list[str] = []
    if path.exists():
        text = path.read_text(encoding="utf-8")
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"cannot edit {path}, it is not valid TOML ({exc}); fix it") from exc
        lines = text.splitlines()
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), None)
    top = len(lines) if first_table is None else first_table
    for key, value in values.items():
        # json.dumps gives a valid TOML basic string (and TOML numbers) for these scalars.
        line = f"{key} = {json.dumps(value)}"
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        index = next((i for i in range(top) if pattern.match(lines[i])), None)
        if index is None:
            lines.insert(top, line)
            top += 1
        else:
            lines[index] = line
    data = "\n".join(lines) + "\n"
    tomllib.loads(data)  # never write a file that Heron itself could not read back
    replace_private_file(path, data)


def remove_config_keys(path: Path, keys: tuple[str, ...]) -> bool:
    """Remove top-level keys (`api_key` on logout) from a TOML config file, keeping every other
    line, written as `update_config_file` writes. False if the file has none of them."""
    import re
    import tomllib

    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot edit {path}, it is not valid TOML ({exc}); fix it") from exc
    if not any(key in before for key in keys):
        return False
    lines = text.splitlines()
    first_table = next((i for i, line in enumerate(lines) if line.lstrip().startswith("[")), None)
    top = len(lines) if first_table is None else first_table
    patterns = [re.compile(rf"^\s*{re.escape(key)}\s*=") for key in keys]
    kept = [
        line
        for i, line in enumerate(lines)
        if i >= top or not any(pattern.match(line) for pattern in patterns)
    ]
    data = "\n".join(kept) + "\n"
    try:
        after = tomllib.loads(data)  # never write a file that Heron itself could not read back
    except tomllib.TOMLDecodeError:
        after = None
    if after != {name: value for name, value in before.items() if name not in keys}:
        # Written in a form this line-based edit does not handle: change nothing.
        raise ConfigError(f"cannot remove {', '.join(keys)} from {path}; edit it by hand")
    replace_private_file(path, data)
    return True


def replace_private_file(path: Path, data: str) -> None:
    """Write `data` owner-only (it may hold an API key) and atomically: a temporary file in
    the same directory, then rename, so a crash leaves the old file or the new one."""
    import tempfile

    path = Path(os.path.realpath(path))  # a symlinked config (dotfiles) stays a symlink
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- [providers.NAME] ----------------------------------------------------------------------------
# More endpoints the model picker offers:
#
#   [providers.ollama]
#   base_url = "http://localhost:11434/v1"
#   models = ["qwen2.5-coder:14b", "llama3.1:8b"]   # optional: else asked from GET /models
#
#   [providers.openrouter]
#   base_url = "https://openrouter.ai/api/v1"
#   api_key_env = "OPENROUTER_API_KEY"              # or api_key = "sk-..."

_PROVIDER_KEYS = {"base_url", "api_key", "api_key_env", "models"}


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
        unknown = sorted(set(table) - _PROVIDER_KEYS)
        if unknown:
            known = ", ".join(sorted(_PROVIDER_KEYS))
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {known}")
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
