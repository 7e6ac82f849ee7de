"""The model asks the user: the `ask_user` tool, and MCP servers' elicitation requests.

- `ask`: putting questions to the user through the client: an `elicitation/create` form when
  the client advertised `elicitation.form`, else one `session/request_permission` per
  question whose options are the choices (which every ACP client can answer); with nobody to
  ask (`heron exec`), no question at all.
- `tool`: `ask_user`, the tool the model calls (a tool call like any other: shown, then
  completed with the answers, which go to the model as its result).
- `forward`: an MCP server's `elicitation/create` passed on to the client the same way.
"""
