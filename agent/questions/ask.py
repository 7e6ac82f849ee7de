"""Putting questions to the user through the client (see the package's docstring).

Never hangs on its own: a `session/cancel` cancels the turn, and with it the request (the
client is told with `$/cancel_request`); a client that answers with an error fails the call
with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.acp.wire import ConnectionClosed, RpcError

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent.files.backend import ClientRequest

OTHER = "Other (your own answer)"
NOBODY = (
    "No user is available to answer questions here (Heron runs without one, as in "
    "`heron exec`). Decide yourself, go on, and say in your answer what you assumed."
)


class QuestionFailed(Exception):
    """The client could not ask: the message says why (the call fails with it)."""


@dataclass
class Choice:
    label: str
    description: str | None = None


@dataclass
class Question:
    text: str
    choices: list[Choice] = field(default_factory=list)
    multiple: bool = False  # several choices may be picked
    other: bool = True  # a free-text answer is offered (forms only)


@dataclass
class Answers:
    """How the user answered: `action` is accept, decline or cancel; `values` by question."""

    action: str
    values: list[list[str]] = field(default_factory=list)  # the choices picked, per question
    texts: list[str | None] = field(default_factory=list)  # the free text, per question

    def summary(self, questions: list[Question]) -> str:
        """What the model reads."""
        if self.action == "decline":
            return "The user declined to answer."
        if self.action != "accept":
            return "The user dismissed the question without answering."
        lines = []
        for index, question in enumerate(questions):
            picked = self.values[index] if index < len(self.values) else []
            text = self.texts[index] if index < len(self.texts) else None
            said = [*picked, *([f"(in their own words) {text}"] if text else [])]
            lines.append(f"{question.text}\n→ {'; '.join(said) if said else '(no answer)'}")
        return "The user answered:\n\n" + "\n\n".join(lines)


@dataclass
class Asker:
    """What asking needs of the session: its client and what that client can show."""

    session_id: str
    request: ClientRequest
    form: bool  # the client advertised elicitation.form
    present: Callable[[], bool]  # somebody is there to answer (read when asked)


async def ask(asker: Asker, call_id: str, title: str, questions: list[Question]) -> Answers:
    """Ask `questions` (linked to the tool call `call_id`); the answers, or QuestionFailed."""
    try:
        if asker.form:
            return await _by_form(asker, call_id, title, questions)
        return await _by_permission(asker, call_id, title, questions)
    except (RpcError, ConnectionClosed) as exc:
        reason = exc.reason if isinstance(exc, RpcError) else str(exc)
        raise QuestionFailed(f"The question could not be asked: {reason}") from exc


def form_schema(questions: list[Question]) -> dict[str, Any]:
    """The form: one property per question (a pick among `oneOf` choices, an array for
    several), each with a free-text field beside it."""
    properties: dict[str, Any] = {}
    for index, question in enumerate(questions, 1):
        key = f"q{index}"
        options = [_option(c) for c in question.choices]
        if not options:
            properties[key] = {"type": "string", "title": question.text}
            continue
        if question.multiple:
            items = {"anyOf": options}
            properties[key] = {"type": "array", "title": question.text, "items": items}
        else:
            properties[key] = {"type": "string", "title": question.text, "oneOf": options}
        if question.other:
            properties[f"{key}_other"] = {"type": "string", "title": OTHER}
    return {"type": "object", "properties": properties}


def _option(choice: Choice) -> dict[str, Any]:
    option = {"const": choice.label, "title": choice.label}
    if choice.description:
        option["description"] = choice.description
    return option


async def _by_form(asker: Asker, call_id: str, title: str, questions: list[Question]) -> Answers:
    params = {
        "sessionId": asker.session_id,
        "toolCallId": call_id,
        "mode": "form",
        "message": title,
        "requestedSchema": form_schema(questions),
    }
    result = await asker.request("elicitation/create", params)
    action = result.get("action") if isinstance(result, dict) else None
    if action != "accept":
        return Answers(action if action in ("decline", "cancel") else "decline")
    content = result.get("content")
    content = content if isinstance(content, dict) else {}
    answers = Answers("accept")
    for index, question in enumerate(questions, 1):
        allowed = {c.label for c in question.choices}
        value = content.get(f"q{index}")
        picked = value if isinstance(value, list) else [value]
        chosen = [v for v in picked if isinstance(v, str) and (v in allowed or not allowed) and v]
        answers.values.append(chosen)
        other = content.get(f"q{index}_other")
        answers.texts.append(other.strip() if isinstance(other, str) and other.strip() else None)
    return answers


async def _by_permission(
    asker: Asker, call_id: str, title: str, questions: list[Question]
) -> Answers:
    """One permission question per question: a choice is an `allow_once` option, skipping is
    the reject; free text cannot be offered this way."""
    answers = Answers("accept")
    for question in questions:
        options = [
            {"optionId": f"choice-{i}", "name": c.label, "kind": "allow_once"}
            for i, c in enumerate(question.choices)
        ]
        options.append({"optionId": "skip", "name": "Skip this question", "kind": "reject_once"})
        shown = question.text + "".join(
            f"\n- {c.label}" + (f": {c.description}" if c.description else "")
            for c in question.choices
        )
        params = {
            "sessionId": asker.session_id,
            "toolCall": {
                "toolCallId": call_id,
                "title": question.text,
                "kind": "other",
                "status": "pending",
                "content": [{"type": "content", "content": {"type": "text", "text": shown}}],
            },
            "options": options,
        }
        result = await asker.request("session/request_permission", params)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return Answers("cancel")
        picked = str(outcome.get("optionId", ""))
        number = picked.removeprefix("choice-")
        index = int(number) if picked.startswith("choice-") and number.isdigit() else -1
        found = question.choices[index].label if 0 <= index < len(question.choices) else None
        answers.values.append([found] if found else [])
        answers.texts.append(None)
    return answers
