"""Every rule's docstring example, run through the engine and judged by the strict validators.

For each rule: the Bad history is rejected by a strict provider, the engine turns it into exactly the
Good history, the rule's own code is among the findings, and the Good history is accepted: by the strict
validator for a universal rule, by the validator of every provider of the profiles for a profile rule.
The docstrings are read by product code (proxy/repair/catalog.py, from the registry: proxy/registry.py), so the literal cases at the end state
expected repairs independently of it.
"""

import hashlib

import pytest

from proxy.dialects.chat.plan import repair
from proxy.registry import rule_docs
from proxy.repair import DEFAULT_PLACEHOLDER
from proxy.repair.catalog import RuleDoc
from tests.support.provider_validators import provider_violations
from tests.support.strict_validator import violations

SKIP = ("S12",)  # GE-3 is the gemini profile's business (see conftest)
RULES = rule_docs("chat")


def body_of(messages: list, profile: str = "openai", request: dict | None = None) -> dict:
    # DeepSeek enforces reasoning_content in thinking mode only (DS-3): use a thinking model there. A rule whose
    # example names the request's other fields (its model) gets them.
    return {"model": "deepseek-reasoner" if profile == "deepseek" else "gpt-4o", **(request or {}), "messages": messages}


def recalled_from(doc: RuleDoc) -> dict:
    return {call["id"]: turn for turn in doc.recalled for call in turn["tool_calls"]}


def emitted(doc: RuleDoc) -> dict:
    """What the upstream emitted that its validator holds a replay to: Gemini's ``extra_content`` per call (GE-4),
    OpenRouter's ``reasoning_details`` per call of the turn (GE-8)."""
    signatures = {c["id"]: c["extra_content"] for t in doc.recalled for c in t["tool_calls"] if "extra_content" in c}
    return signatures | {c["id"]: t["reasoning_details"] for t in doc.recalled if "reasoning_details" in t for c in t["tool_calls"]}


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
    signatures = emitted(doc)
    for provider in doc.profiles:
        assert provider_violations(body_of(doc.bad, provider, doc.request), provider, emitted_signatures=signatures), (doc.code, provider)
        result = repair(body_of(doc.bad, provider, doc.request), recalled_from(doc), profile=provider)
        assert provider_violations(result.body, provider, emitted_signatures=signatures) == [], (doc.code, provider)


@pytest.mark.parametrize("doc", RULES, ids=[doc.code for doc in RULES])
def test_example_repairs_to_good(doc: RuleDoc) -> None:
    result = repair(body_of(doc.bad, profile_of(doc), doc.request), recalled_from(doc), profile=profile_of(doc))
    assert doc.code in {finding.code for finding in result.findings}
    if doc.good is None:
        assert result.rejected is not None and result.rejected.code == doc.code
    else:
        assert result.rejected is None
        assert result.body["messages"] == doc.good
        if not doc.profiles:
            assert violations(result.body, skip=SKIP) == []


@pytest.mark.parametrize("doc", [d for d in RULES if d.good is not None], ids=lambda d: d.code)
def test_good_example_is_accepted_by_a_strict_provider(doc: RuleDoc) -> None:
    if not doc.profiles:
        assert violations(body_of(doc.good), skip=SKIP) == []
    signatures = emitted(doc)
    for provider in doc.profiles:
        assert provider_violations(body_of(doc.good, provider, doc.request), provider, emitted_signatures=signatures) == [], provider


@pytest.mark.parametrize("doc", [d for d in RULES if d.good is not None], ids=lambda d: d.code)
def test_good_example_needs_nothing(doc: RuleDoc) -> None:
    body = body_of(doc.good, request=doc.request)
    result = repair(body, recalled_from(doc), profile=profile_of(doc))
    assert result.findings == () and result.body is body


def test_codes_and_names_are_unique() -> None:
    assert len({doc.code for doc in RULES}) == len(RULES)
    assert len({doc.name for doc in RULES}) == len(RULES)


def test_every_rule_cites_provider_rules_and_has_an_example() -> None:
    for doc in RULES:
        assert doc.answers and doc.bad and doc.summary, doc.code


# --------------------------------------------------------------------------------------------------
# literal cases: bad history in, expected history out, both written here
# --------------------------------------------------------------------------------------------------

USER = {"role": "user", "content": "Weather?"}
LONG_ID = "toolu_01A09q90qw90lq917835lq9x01A09q90qw90lq9"  # 45 characters, over OpenAI's 40


def call(cid: str, arguments: str = "{}", **extra) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "weather", "arguments": arguments}, **extra}


def calls(*items: dict, **fields) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": list(items), **fields}


def tool(cid: str, content: str = "18C") -> dict:
    return {"role": "tool", "tool_call_id": cid, "content": content}


LITERAL_CASES = [
    pytest.param("openai", [USER, calls(call("c1"), call("c2")), tool("c1")],
                 [USER, calls(call("c1"), call("c2")), tool("c1"), tool("c2", DEFAULT_PLACEHOLDER)],
                 ["TM104"], id="TM104-placeholder"),
    pytest.param("openai", [USER, calls(call("c1", '{"city": "Par'), call("c2", "")), tool("c1"), tool("c2")],
                 [USER, calls(call("c1", '{"_toolmend_unparsed_arguments":"{\\"city\\": \\"Par"}'), call("c2")),
                  tool("c1"), tool("c2")],
                 ["TM203", "TM203"], id="TM203-arguments"),
    pytest.param("openai", [USER, calls(call(LONG_ID)), tool(LONG_ID)],
                 [USER, calls(call("call_" + hashlib.sha256(LONG_ID.encode()).hexdigest()[:24])),
                  tool("call_" + hashlib.sha256(LONG_ID.encode()).hexdigest()[:24])],
                 ["TM208", "TM208"], id="TM208-sha256-id"),
    pytest.param("openai", [USER, tool("c1"), tool("c2")],
                 [USER, calls({"id": "c1", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}},
                              {"id": "c2", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}}),
                  tool("c1"), tool("c2")],
                 ["TM101", "TM101"], id="TM101-synthesized"),
    pytest.param("mistral", [USER, calls(call("call_1"), call("call_2")), tool("call_1"), tool("call_2")],
                 [USER, calls(call("MPgo7AnDR"), call("XfskGQQwT")), tool("MPgo7AnDR"), tool("XfskGQQwT")],
                 ["TM301"] * 4, id="TM301-mistral-ids"),
    pytest.param("mistral", [USER, calls(call("a1B2c3D4e")), tool("a1B2c3D4e"), {"role": "user", "content": "And tomorrow?"}],
                 [USER, calls(call("a1B2c3D4e")), tool("a1B2c3D4e"), {"role": "assistant", "content": "(tool results received)"},
                  {"role": "user", "content": "And tomorrow?"}],
                 ["TM302"], id="TM302-bridge"),
    pytest.param("deepseek", [USER, calls(call("call_1")), tool("call_1")],
                 [USER, calls(call("call_1"), reasoning_content=""), tool("call_1")],
                 ["TM304"], id="TM304-nothing-remembered"),
    pytest.param("anthropic", [USER, calls(call("call_1"), content=[{"type": "text", "text": ""}, {"type": "text", "text": "Checking."}]),
                               tool("call_1")],
                 [USER, calls(call("call_1"), content=[{"type": "text", "text": "Checking."}]), tool("call_1")],
                 ["TM306"], id="TM306-empty-part"),
    pytest.param("gemini", [tool("call_1")],
                 [{"role": "user", "content": "(earlier conversation omitted)"},
                  calls({"id": "call_1", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}}, content=""),
                  tool("call_1")],
                 ["TM101", "TM305", "TM308"], id="TM308-opening-user"),
    pytest.param("vllm", [USER, {"role": "assistant", "tool_calls": [call("call_1", '"Paris"')]}, tool("call_1")],
                 [USER, calls(call("call_1", '{"_toolmend_unparsed_arguments":"\\"Paris\\""}')), tool("call_1")],
                 ["TM309", "TM310"], id="TM309-TM310-vllm"),
    pytest.param("groq", [USER, calls(call("call_1", index=0), reasoning="r"), tool("call_1")],
                 [USER, calls(call("call_1")), tool("call_1")],
                 ["TM303"], id="TM303-closed-schema"),
    pytest.param("xai", [USER, calls(call("call_1"), content=[]), tool("call_1")],
                 [USER, calls(call("call_1"), content=""), tool("call_1")],
                 ["TM305"], id="TM305-xai"),
]


@pytest.mark.parametrize(("profile", "bad", "good", "codes"), LITERAL_CASES)
def test_literal_repair(profile: str, bad: list, good: list, codes: list[str]) -> None:
    result = repair(body_of(bad, profile), profile=profile)
    assert [finding.code for finding in result.findings] == codes
    assert result.body["messages"] == good
    assert provider_violations(body_of(good, profile), profile) == []


def test_a_renamed_result_reports_the_length_of_the_id_it_had() -> None:
    # The finding used to tell the length of the new id (29 characters), read back after the rename.
    result = repair(body_of([USER, calls(call(LONG_ID)), tool(LONG_ID)]))
    assert [finding.detail for finding in result.findings if finding.code == "TM208"][1] == f"tool_call_id of {len(LONG_ID)} characters renamed"
