"""A server given without a model (OPENAI_BASE_URL, no HERON_MODEL): Heron never sends it
OpenAI's default model name. Its only chat model is taken, and each session is told once;
with several, or none listed, a prompt fails saying that a model must be named (the Model
picker lists the server's models: picking one names it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.errors import ModelUnnamed
from agent.options import discovery
from agent.options.catalog import default_endpoint

if TYPE_CHECKING:
    from agent.config import Settings
    from agent.options.holder import OptionHolder

TOLD = "model-taken"  # in `session.told` once the session was told which model was taken


def take_only_model(shared: Settings) -> bool:
    """An unnamed model becomes the endpoint's only listed one, if it lists exactly one."""
    listed = discovery.cached(default_endpoint(shared)) or []
    if shared.model_source != "unnamed" or len(listed) != 1:
        return False
    shared.model, shared.model_source = listed[0], "server"
    return True


async def name_the_model(session: OptionHolder) -> str | None:
    """Before a model request: what to tell the user about the model taken (once), or
    ModelUnnamed (agent.errors) when no model can be taken. A pick in the picker names it."""
    shared = session.shared_settings
    if session.choices.model is not None or session.choices.provider is not None:
        return None
    if shared.model_source == "unnamed":
        endpoint = default_endpoint(shared)
        await discovery.settle([endpoint], shared, session.connection.start_soon)
        take_only_model(shared)  # unless the list's arrival took it meanwhile
        if shared.model_source == "unnamed":
            raise ModelUnnamed(shared.base_url or "OpenAI", discovery.cached(endpoint) or [])
    if shared.model_source != "server" or TOLD in session.told:
        return None
    session.told.add(TOLD)
    return (
        f"Using `{shared.model}`, the only model the server lists (set HERON_MODEL, or `model` "
        "in Heron's config file, to name another)."
    )
