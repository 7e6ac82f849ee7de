"""Why a turn (or one of its tool calls) cannot go on: a few named exceptions.

The turn raises them where the problem is found and never builds a JSON-RPC error itself:
what ends the prompt (`TurnFailed`) is answered as an error by the one place that runs a
prompt (`agent.app.server`, `Server.prompt`); what ends only a tool call (`Refused`: the
permission check's answer, or a tool's when the editor refused what it needed) is caught by the
tool calls (`agent.turn.calls`), which give the model its text, show the user theirs and mark
the call `failed`.
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


class ModelUnnamed(TurnFailed):
    """A server was given (OPENAI_BASE_URL) without a model, and it lists several or none."""

    def __init__(self, where: str, listed: list[str]) -> None:
        shown = ", ".join(listed[:10]) + (
            f" and {len(listed) - 10} more" if len(listed) > 10 else ""
        )
        lists = f"It lists: {shown}." if listed else "It lists no model Heron could pick."
        super().__init__(
            f"No model is named for the server at {where}. Pick one in the Model picker, or "
            "set HERON_MODEL (or `model` in Heron's config file, or --model). " + lists
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
    """A tool call did not run, or the editor refused what it needed: `for_model` is what the
    model reads (with what to do next), `for_user` what the failed call shows the user.

    Each outcome words both here, in one place, so a text written for the model ("do not retry
    it") never lands in the user's view and the user's ("you rejected") never misleads the model.
    """

    def __init__(self, for_model: str, for_user: str | None = None) -> None:
        super().__init__(for_model)
        self.for_model = for_model
        self.for_user = for_model if for_user is None else for_user


# What the user calls a call of each ACP tool kind ("You rejected this command").
_CALLED = {"execute": "command", "edit": "edit", "delete": "deletion", "move": "move"}


class RejectedByUser(Refused):
    """The user answered the permission question with "reject"."""

    def __init__(self, kind: str | None = None) -> None:
        what = _CALLED.get(kind or "", "call")
        super().__init__(REJECTED, f"You rejected this {what}; it was not run.")


class AlwaysRejected(Refused):
    """An earlier "always reject" covers this call: it is refused without asking."""

    def __init__(self) -> None:
        super().__init__(
            "The user chose to always reject this; do not try it again.",
            "Not run: you chose to always reject this.",
        )


class ReadOnlyMode(Refused):
    """The session's mode is read-only and the call would change something."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"Refused: the session is in read-only mode, which does not allow {what} tools. "
            "Tell the user what you would do instead.",
            f"Not run: the session is in read-only mode, which allows no {what} tools.",
        )


class TargetChanged(Refused):
    """While permission was asked, a path of the call came to lead elsewhere (a symlink)."""

    def __init__(self, leads_to: str) -> None:
        happened = f"the target changed; it now leads to {leads_to}. Nothing was written."
        super().__init__(
            f"Not run: while permission was asked, {happened} Look at it again before retrying.",
            f"Not run: while you were asked, {happened}",
        )


class QuestionFailed(Refused):
    """The editor answered the permission question with an error: nobody said yes."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"Not run: the editor could not ask the user ({reason}). Tell the user; do not "
            "retry it at once.",
            f"Not run: the editor could not show the permission question ({reason}).",
        )


class EditorRefused(Refused):
    """The editor answered a request the call needed (a terminal, a write) with an error;
    `reason` is its own words (agent.acp.wire.RpcError.reason), never the JSON-RPC code."""

    def __init__(self, action: str, reason: str) -> None:
        self.action = action
        self.reason = reason
        refused = f"The editor refused to {action}: {reason}"
        super().__init__(
            f"{refused}. Tell the user, or take another way: the same call would likely be "
            "refused again.",
            refused,
        )
