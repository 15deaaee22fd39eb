"""What the Gemini rules share: the pending positions ``splice`` moves, and the runs ``merge_runs`` finds."""

from typing import Any

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.rules import adjacent_model, split_responses
from proxy.dialects.gemini.rules.edit import gemini_context, pending, splice
from proxy.dialects.gemini.target import DEVELOPER

MODEL = {"role": "model", "parts": [{"text": "a"}]}
RESPONSE = {"parts": [{"functionResponse": {"name": "f", "response": {}}}]}  # no role: the user's


def context(contents: list[Any], marked: tuple[int, ...] = ()) -> Any:
    ctx = gemini_context(list(contents), {"contents": contents}, {}, DEFAULT_POLICY, gemini_profile("gemini"), DEVELOPER)
    ctx.pending = [at in marked for at in range(len(contents))]
    return ctx


def test_the_pending_positions_listed_before_a_splice_are_listed_again_moved() -> None:
    ctx = context([dict(MODEL) for _ in range(6)], marked=(1, 4))
    assert pending(ctx) == [1, 4]
    splice(ctx, [(0, []), (2, [MODEL]), (3, [MODEL, MODEL])])
    assert pending(ctx) == [0, 1, 2, 3, 4]  # the content at 1 moved to 0; 2 and 3 came in; the one at 4 stayed


def test_runs_are_merged_around_what_is_not_a_content() -> None:
    """A string among the contents is never of a role: it ends a run, and the runs around it are still found."""
    ctx = context([dict(MODEL), dict(MODEL), dict(MODEL), "model", dict(MODEL), dict(RESPONSE), dict(RESPONSE), None, dict(RESPONSE)])
    adjacent_model.apply(ctx)
    split_responses.apply(ctx)
    assert [(finding.code, finding.index) for finding in ctx.findings] == [("TM603", 1), ("TM603", 2), ("TM601", 6)]
    assert [len(content["parts"]) if type(content) is dict else content for content in ctx.messages] == [3, "model", 1, 2, None, 1]
