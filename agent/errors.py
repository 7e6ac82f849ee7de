"""Why a turn (or one of its tool calls) cannot go on: a few named exceptions.

The turn raises them where the problem is found and never builds a JSON-RPC error itself:
what ends the prompt (`TurnFailed`) is answered as an error by the one place that runs a
prompt (`agent.app.server`, `Server.prompt`); what ends only a tool call (`Refused`) is caught
by the tool calls (`agent.turn.calls`), which tell the model and mark the call `failed`.
`/undo` (agent.commands.undo) tells a rejection apart by its type (`RejectedByUser`). A cancelled
turn is anyio's cancel scope, not an exception of this family: `Session.run_turn` answers
`cancelled` for it.

The family imports nothing: the turn raises it, and the commands below the turn (which run
tool calls and check the configuration through it) catch or pass it on.
"""

from __future__ import annotations

NOT_CONFIGURED = (
    "Heron has no model configured. Run `heron setup` in a terminal: it asks for the endpoint "
    "(OpenAI, Ollama, vLLM, LM Studio, OpenRouter, llama.cpp), the key and the model, and saves "
    "them in ~/.config/heron/config.toml. Or set OPENAI_API_KEY (and HERON_MODEL) for OpenAI, "
    "or OPENAI_BASE_URL for another OpenAI-compatible server, in the `env` of Heron's entry in "
    "your editor's agent settings or as --base-url/--model flags."
)
REJECTED = "Rejected by the user: the call was not run. Do not retry it; ask or take another way."


class TurnFailed(Exception):
    """The prompt cannot be answered with a stop reason; the message says why (for the user)."""


class NotConfigured(TurnFailed):
    """No model is configured."""

    def __init__(self) -> None:
        super().__init__(NOT_CONFIGURED)


class ConfigBroken(TurnFailed):
    """The settings cannot be used (a config file that does not parse, a bad value)."""

    def __init__(self, problem: str) -> None:
        super().__init__(
            f"Heron cannot use its settings: {problem}. Fix it (or run `heron setup`) and "
            "send the prompt again."
        )


class ModelFailure(TurnFailed):
    """The model request failed (`__cause__` is the `agent.llm.LLMError`)."""


class WindowTooSmall(TurnFailed):
    """The server's context window cannot hold Heron's own instructions and tools and still
    leave room for a conversation: said plainly, before a request that cannot work."""

    def __init__(self, window: int, needed: int, setting: bool = False) -> None:
        """`setting`: the window is the `context_window` setting's, not the server's."""
        larger = 8192
        while larger < 3 * needed:
            larger *= 2
        whose = "The context_window setting is" if setting else "This model server's context is"
        fix = (
            f"Raise context_window (e.g. to {larger}) if the server allows it"
            if setting
            else f"Start the server with a larger context (e.g. `-c {larger}` for llama.cpp's "
            f"llama-server, `num_ctx` {larger} for Ollama), or use a model with a larger one"
        )
        super().__init__(
            f"{whose} {window:,} tokens; Heron's instructions and tools need about "
            f"{round(needed, -2):,} of them, which leaves no room for the conversation. {fix}."
        )


class Refused(Exception):
    """A tool call may not run; the message is what the model is told."""


class RejectedByUser(Refused):
    """The user answered the permission question with "reject"."""

    def __init__(self) -> None:
        super().__init__(REJECTED)
