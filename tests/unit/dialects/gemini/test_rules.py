"""The Gemini dialect's repairs: each rule's docstring example, and the structural rules over the view.

A rule's Bad history, repaired for its Request target with its Recalled turns, must become exactly its Good history;
the strict Gemini validator refuses Bad with one of the rule's GN ids and takes Good (with the signatures of the
remembered turns minted by the server). A rule that acts only when the operator opts in is repaired under that policy,
for the server that refuses its Bad history (``OPTED_IN``).
"""

from typing import Any

import pytest

from proxy.dialects.chat.plan import DEFAULT_POLICY
from proxy.dialects.gemini.plan import plan
from proxy.dialects.gemini.profiles import gemini_profile
from proxy.dialects.gemini.rules import PIPELINE
from proxy.dialects.gemini.target import GeminiTarget
from proxy.repair import Policy
from proxy.repair.catalog import RuleDoc, describe
from tests.support.gemini_validator import ServerState, check

#: The Gemini rules the plan runs (the structural ones are tested over chat's histories), each once.
RULES = dict.fromkeys(step.rule for phase in PIPELINE.phases if phase.checked for step in phase.scoped
                      if step.rule.__name__.startswith("proxy.dialects.gemini."))  # type: ignore[attr-defined]
DOCS = [describe(rule) for rule in RULES]
#: The rules that act only under an operator's opt-in: the policy, and whether the server they answer takes a history
#: that ends with the model's text (the validator's ``prefill``).
OPTED_IN = {"TM614": (Policy(continue_model_turn=True), False)}


def target_of(doc: RuleDoc) -> GeminiTarget:
    return GeminiTarget(doc.request.get("family", "developer"), doc.request.get("model", "gemini-2.5-flash"))


def state_of(doc: RuleDoc) -> ServerState:
    """A server that minted the remembered turns' signatures and the ones the client kept."""
    state = ServerState()
    for turn in doc.recalled:
        state.mint(turn["parts"])
    for content in doc.bad:
        state.mint(content["parts"])
    return state


def repaired(doc: RuleDoc, policy: Policy = DEFAULT_POLICY) -> Any:
    body = {"contents": doc.bad}
    target = target_of(doc)
    planned = plan(body, gemini_profile(target.family), target, policy)
    assert planned is not None, "the check found nothing to repair"
    recalled = {key: turn for turn in doc.recalled for key in turn["ids"] if key in planned.recall}
    return planned.repair(recalled, policy)


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_docstring_example(doc: RuleDoc) -> None:
    target = target_of(doc)
    policy, prefill = OPTED_IN.get(doc.code, (DEFAULT_POLICY, True))
    refused = check({"contents": doc.bad}, target, state_of(doc), prefill=prefill)
    assert refused is not None and refused.rule in doc.answers, refused
    result = repaired(doc, policy)
    assert result.rejected is None
    assert result.body["contents"] == doc.good
    assert doc.code in {finding.code for finding in result.findings}
    assert check(result.body, target, state_of(doc), prefill=prefill) is None


@pytest.mark.parametrize("doc", DOCS, ids=[doc.code for doc in DOCS])
def test_good_needs_no_repair(doc: RuleDoc) -> None:
    assert plan({"contents": doc.good}, gemini_profile("gemini"), target_of(doc)) is None
