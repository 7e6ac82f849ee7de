"""`ask_user`: the model asks the user one or more questions and waits for the answers.

It is a tool call like any other (kind `other`, read-only, so no permission is asked to ask):
shown, then completed with the answers, which the model reads as the call's result. How the
questions reach the user is `agent.questions.ask`'s business. Questions of one session are
asked one call at a time.
"""

from __future__ import annotations

import anyio
from pydantic import BaseModel, Field

from agent.questions.ask import NOBODY, Asker, Choice, Question, QuestionFailed, ask
from agent.tools.base import OneShotTool, Preview, Safety, ToolContext, ToolError, ToolResult


class OptionArg(BaseModel):
    label: str = Field(description="The choice as the user sees it (short).")
    description: str | None = Field(None, description="What choosing it means, if not obvious.")


class QuestionArg(BaseModel):
    question: str = Field(description="The question, complete and specific.")
    options: list[OptionArg] = Field(
        default_factory=list,
        max_length=20,
        description="The choices (2-6), best first; none: a free answer.",
    )
    multi_select: bool = Field(False, description="The user may pick several choices.")


class AskUserArgs(BaseModel):
    questions: list[QuestionArg] = Field(min_length=1, max_length=4)


class AskUser(OneShotTool[AskUserArgs]):
    name = "ask_user"
    description = (
        "Ask the user one or more questions and wait for the answers. Use it when a decision is "
        "theirs to make (a choice between approaches, a missing requirement, a preference), "
        "not for what you can find out yourself. Offer short choices; the user may also answer "
        "in their own words. If nobody can answer, you are told so: then decide and say what "
        "you assumed."
    )
    kind = "other"
    Args = AskUserArgs
    default_safety = Safety.READ_ONLY

    def __init__(self) -> None:
        self._one_at_a_time = anyio.Lock()

    def permission_keys(self, args: AskUserArgs) -> list[str]:
        return []

    async def describe(self, args: AskUserArgs, ctx: ToolContext) -> Preview:
        first = args.questions[0].question
        more = f" (+{len(args.questions) - 1} more)" if len(args.questions) > 1 else ""
        return Preview(title=f"Question: {_shorten(first)}{more}")

    async def run(self, args: AskUserArgs, ctx: ToolContext, preview: Preview) -> ToolResult:
        if not ctx.user_present:
            return ToolResult(ok=True, output=NOBODY)
        questions = [
            Question(
                q.question,
                [Choice(o.label, o.description) for o in q.options],
                multiple=q.multi_select,
            )
            for q in args.questions
        ]
        asker = Asker(ctx.session_id, ctx.client_request, ctx.elicitation_form, lambda: True)
        async with self._one_at_a_time:
            try:
                answers = await ask(asker, preview.call_id, preview.title, questions)
            except QuestionFailed as exc:
                raise ToolError(str(exc)) from exc
        return ToolResult(ok=True, output=answers.summary(questions))


def _shorten(text: str, limit: int = 80) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
