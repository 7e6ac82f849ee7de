"""The params of `initialize` and `session/new`, read without pydantic.

Both come before the first prompt, when neither pydantic nor the ACP models
(`agent.acp.protocol`) need to be imported yet: building them was most of what Heron did before
it could answer `session/new`. Params of the usual shape are read here; anything else (a value
of another type, snake_case member names, a malformed entry) goes through the pydantic models
exactly as before, so their leniency rules and their error messages still decide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

# Plain classes rather than dataclasses: these are made before `session/new` is answered, and a
# dataclass costs a code generation each.


class FileSystemCapabilities:
    __slots__ = ("read_text_file", "write_text_file")

    def __init__(self, read_text_file: bool = False, write_text_file: bool = False) -> None:
        self.read_text_file = read_text_file
        self.write_text_file = write_text_file


class ClientCapabilities:
    """What Heron uses of `clientCapabilities`: the file system, the terminal, and whether the
    client shows `notice` and `compaction_update` updates (`session.notices`,
    `session.compaction`) and elicitation forms (`elicitation.form`)."""

    __slots__ = ("elicitation_form", "fs", "session_compaction", "session_notices", "terminal")

    def __init__(
        self,
        fs: FileSystemCapabilities | None = None,
        terminal: bool = False,
        session_notices: bool = False,
        session_compaction: bool = False,
        elicitation_form: bool = False,
    ) -> None:
        self.fs = fs if fs is not None else FileSystemCapabilities()
        self.terminal = terminal
        self.session_notices = session_notices
        self.session_compaction = session_compaction
        self.elicitation_form = elicitation_form


class ClientInfo:
    __slots__ = ("name", "version")

    def __init__(self, name: str, version: str = "") -> None:
        self.name = name
        self.version = version


class InitializeParams:
    __slots__ = ("client_capabilities", "client_info")

    def __init__(self, client_capabilities: ClientCapabilities, client_info: ClientInfo | None):
        self.client_capabilities = client_capabilities
        self.client_info = client_info


class NewSessionParams:
    __slots__ = ("additional_directories", "cwd", "mcp_servers")

    def __init__(
        self, cwd: str, mcp_servers: list[dict[str, Any]], additional_directories: list[str]
    ) -> None:
        self.cwd = cwd
        self.mcp_servers = mcp_servers
        self.additional_directories = additional_directories


def read_initialize(params: dict[str, Any]) -> InitializeParams:
    """`initialize` params; RpcError (invalid params) as the pydantic model would raise it."""
    fast = _initialize(params)
    if fast is not None:
        return fast
    from agent.acp import protocol

    parsed = parse(protocol.InitializeParams, params)
    caps, info = parsed.client_capabilities, parsed.client_info
    return InitializeParams(
        ClientCapabilities(
            FileSystemCapabilities(caps.fs.read_text_file, caps.fs.write_text_file),
            caps.terminal,
            *_offers(caps.session, ("notices", "compaction")),
            *_offers(caps.elicitation, ("form",)),
        ),
        ClientInfo(info.name, info.version) if info is not None else None,
    )


def _offers(group: Any, names: tuple[str, ...]) -> list[bool]:
    """For each name, whether `group` (a capability object) advertises it: an object there
    (`{}`) means yes; absent, null or anything else means no (ACP's leniency)."""
    return [isinstance(group, dict) and isinstance(group.get(name), dict) for name in names]


def read_new_session(params: dict[str, Any]) -> NewSessionParams:
    """`session/new` params; RpcError (invalid params) as the pydantic model would raise it."""
    fast = _new_session(params)
    if fast is not None:
        return fast
    from agent.acp import protocol

    parsed = parse(protocol.NewSessionParams, params)
    return NewSessionParams(parsed.cwd, parsed.mcp_servers, parsed.additional_directories)


def certain_session_id(params: dict[str, Any], *required: str) -> str | None:
    """The `sessionId` of params that the models (`SessionIdParams`, and `PromptParams` with
    `required=("prompt",)`) are certain to accept, or None: let the model decide.

    The prompt's blocks are read leniently (a malformed block is dropped, a non-list is no
    blocks), so only `sessionId` and the presence of `prompt` can make these fail.
    """
    session_id = params.get("sessionId")
    if type(session_id) is not str or "session_id" in params:
        return None
    return session_id if all(name in params for name in required) else None


def read_prompt_blocks(params: dict[str, Any]) -> list[Any]:
    """The content blocks of `session/prompt` params (pydantic models, see `protocol`)."""
    from agent.acp import protocol

    return parse(protocol.PromptParams, params).prompt


def parse(model: type[BaseModel], params: dict[str, Any]) -> Any:
    """Validate `params` with a pydantic model; what fails is answered as invalid params."""
    from pydantic import ValidationError

    from agent.acp.wire import INVALID_PARAMS, RpcError

    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise RpcError(INVALID_PARAMS, f"Invalid params: {problems}") from exc


# -- the usual shapes, or None: the pydantic model decides --------------------------------------

_UNSURE: Any = object()


def _initialize(params: Any) -> InitializeParams | None:
    if not isinstance(params, dict) or type(params.get("protocolVersion")) is not int:
        return None
    if not params.keys().isdisjoint(("protocol_version", "client_capabilities", "client_info")):
        return None  # snake_case names are accepted too: the model knows which one wins
    caps = _capabilities(params.get("clientCapabilities", _ABSENT))
    info = _client_info(params.get("clientInfo"))
    if caps is None or info is _UNSURE:
        return None
    return InitializeParams(caps, info)


_ABSENT: Any = object()


def _capabilities(value: Any) -> ClientCapabilities | None:
    if value is _ABSENT:
        return ClientCapabilities()
    if type(value) is not dict:
        return None
    fs = value.get("fs", _ABSENT)
    terminal = value.get("terminal", False)
    if type(terminal) is not bool:
        return None  # the model takes "yes", 1... as booleans, and anything else as false
    offered = [
        *_offers(value.get("session"), ("notices", "compaction")),
        *_offers(value.get("elicitation"), ("form",)),
    ]
    if fs is _ABSENT:
        return ClientCapabilities(None, terminal, *offered)
    if type(fs) is not dict or not fs.keys().isdisjoint(("read_text_file", "write_text_file")):
        return None
    read, write = fs.get("readTextFile", False), fs.get("writeTextFile", False)
    if type(read) is not bool or type(write) is not bool:
        return None
    return ClientCapabilities(FileSystemCapabilities(read, write), terminal, *offered)


def _client_info(value: Any) -> ClientInfo | None:
    if value is None:
        return None
    if type(value) is not dict or type(value.get("name")) is not str:
        return _UNSURE
    version = value.get("version", "")
    title = value.get("title")
    if type(version) is not str or not (title is None or type(title) is str):
        return _UNSURE
    return ClientInfo(value["name"], version)


def _new_session(params: Any) -> NewSessionParams | None:
    if not isinstance(params, dict) or type(params.get("cwd")) is not str:
        return None
    if not params.keys().isdisjoint(("mcp_servers", "additional_directories")):
        return None
    servers = params.get("mcpServers", [])
    directories = params.get("additionalDirectories", [])
    if type(servers) is not list or not all(type(s) is dict for s in servers):
        return None  # the model drops what is not an object (and takes a non-list as [])
    if type(directories) is not list or not all(type(d) is str for d in directories):
        return None
    # Copies, as the model makes: the session may keep these while the caller's dict lives on.
    return NewSessionParams(params["cwd"], [dict(s) for s in servers], list(directories))
