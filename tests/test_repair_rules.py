"""Every rule's docstring example, run through the engine and judged by the strict validator.

For each rule: the Bad history is rejected by a strict provider, the engine turns it into exactly the
Good history, the rule's own code is among the findings, and the Good history is accepted.
"""

import pytest

from proxy.repair import repair
from proxy.repair.catalog import RuleDoc, all_rules
from tests.support.provider_validators import provider_violations
from tests.support.strict_validator import violations

SKIP = ("S12",)  # GE-3 is the gemini profile's business (see conftest)
RULES = all_rules()


def body_of(messages: list, profile: str = "openai") -> dict:
    # DeepSeek enforces reasoning_content in thinking mode only (DS-3): use a thinking model there.
    return {"model": "deepseek-reasoner" if profile == "deepseek" else "gpt-4o", "messages": messages}


def recall_from(doc: RuleDoc):
    turns = {call["id"]: turn for turn in doc.recalled for call in turn["tool_calls"]}
    return lambda ids: {cid: turns[cid] for cid in ids if cid in turns}


def profile_of(doc: RuleDoc) -> str:
    return doc.profiles[0] if doc.profiles else "openai"


UNIVERSAL_RULES = [doc for doc in RULES if not doc.profiles]


PROFILE_RULES = [doc for doc in RULES if doc.profiles]


@pytest.mark.parametrize("doc", UNIVERSAL_RULES, ids=[doc.code for doc in UNIVERSAL_RULES])
def test_bad_example_is_rejected_by_a_strict_provider(doc: RuleDoc) -> None:
    assert violations(body_of(doc.bad), skip=SKIP)


@pytest.mark.parametrize("doc", PROFILE_RULES, ids=[doc.code for doc in PROFILE_RULES])
def test_profile_examples_are_judged_by_every_provider_of_the_profile(doc: RuleDoc) -> None:
    # Gemini rejects a replayed call without the signature it emitted (GE-4): tell the validator what it emitted.
    signatures = {c["id"]: c["extra_content"] for t in doc.recalled for c in t["tool_calls"] if "extra_content" in c}
    for provider in doc.profiles:
        assert provider_violations(body_of(doc.bad, provider), provider, emitted_signatures=signatures), (doc.code, provider)
        result = repair(body_of(doc.bad, provider), recall=recall_from(doc), profile=provider)
        assert provider_violations(result.body, provider, emitted_signatures=signatures) == [], (doc.code, provider)


@pytest.mark.parametrize("doc", RULES, ids=[doc.code for doc in RULES])
def test_example_repairs_to_good(doc: RuleDoc) -> None:
    result = repair(body_of(doc.bad), recall=recall_from(doc), profile=profile_of(doc))
    assert doc.code in {finding.code for finding in result.findings}
    if doc.good is None:
        assert result.rejected is not None and result.rejected.code == doc.code
    else:
        assert result.rejected is None
        assert result.body["messages"] == doc.good
        if not doc.profiles:
            assert violations(result.body, skip=SKIP) == []


@pytest.mark.parametrize("doc", [d for d in RULES if d.good is not None], ids=lambda d: d.code)
def test_good_example_needs_nothing(doc: RuleDoc) -> None:
    body = body_of(doc.good)
    result = repair(body, recall=recall_from(doc), profile=profile_of(doc))
    assert result.findings == () and result.body is body


def test_codes_and_names_are_unique() -> None:
    assert len({doc.code for doc in RULES}) == len(RULES)
    assert len({doc.name for doc in RULES}) == len(RULES)


def test_every_rule_cites_provider_rules_and_has_an_example() -> None:
    for doc in RULES:
        assert doc.answers and doc.bad and doc.summary, doc.code
