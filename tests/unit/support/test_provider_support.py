"""Tests of the per-provider test support: ``provider_violations`` rule by rule, and the provider-flavoured
strict upstream (mistral, deepseek, gemini) over uvicorn.

Rule ids and texts: docs/provider-rules.md (sections 1.3-1.14, 3.2).
"""

from __future__ import annotations

import base64
import json
import re

import httpx
import pytest

from tests.support.client_tls import TLS
from tests.support.provider_validators import (
    PROVIDERS,
    deepseek_thinking,
    provider_error,
    provider_first,
    provider_violations,
)
from tests.support.strict_upstream import make_strict_upstream, serve
from tests.support.strict_validator import violations

# --------------------------------------------------------------------------------------------------
# history builders
# --------------------------------------------------------------------------------------------------

MID = "abcDEF123"  # a Mistral-valid id (9 alphanumerics)
MID2 = "XyZ987qrs"


def user(text: str = "hi", **extra) -> dict:
    return {"role": "user", "content": text, **extra}


def system(text: str = "be brief") -> dict:
    return {"role": "system", "content": text}


def call(call_id: str, name: str = "get_weather", arguments: str = '{"city": "Paris"}', **extra) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}, **extra}


def asst_calls(*ids: str, content=None, **extra) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": [call(i) for i in ids], **extra}


def asst(text: str = "done", **extra) -> dict:
    return {"role": "assistant", "content": text, **extra}


def tool(call_id: str, text: str = "sunny", **extra) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text, **extra}


def body(*messages: dict, model: str = "test-model", **extra) -> dict:
    return {"model": model, "messages": list(messages), **extra}


def reasoner(*messages: dict) -> dict:
    return body(*messages, model="deepseek-reasoner")


SIG = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
GEMINI_3 = "google/gemini-3-pro-preview"
THOUGHT = {"type": "reasoning.text", "text": "Check the weather.", "format": "google-gemini-v1", "index": 0}
SIGNED = {"type": "reasoning.encrypted", "data": "c2lnbmF0dXJl", "id": "tool_call_a", "format": "google-gemini-v1", "index": 0}
DETAILS = [THOUGHT, SIGNED]

# --------------------------------------------------------------------------------------------------
# valid histories, per provider
# --------------------------------------------------------------------------------------------------

VALID = {
    ("openai", "round with null content"): body(user(), asst_calls("call_a"), tool("call_a"), asst()),
    ("openai", "leading call turn (S12 skipped)"): body(system(), asst_calls("call_a"), tool("call_a")),
    ("openai", "array arguments (VL-2 skipped)"): body(user(), {"role": "assistant", "content": None,
                                                               "tool_calls": [call("call_a", arguments="[1]")]},
                                                      tool("call_a")),
    ("mistral", "9-char ids, assistant after tools, ends with user"): body(
        system(), user(), asst_calls(MID, MID2), tool(MID), tool(MID2, name="get_weather"), asst("sunny"),
        user("thanks")),
    ("mistral", "ends with tool results"): body(user(), asst_calls(MID, content=""), tool(MID)),
    ("mistral", "assistant prefix last"): body(user(), asst("Sure", prefix=True)),
    ("deepseek", "reasoner with reasoning_content"): reasoner(
        user(), asst_calls("call_a", content="", reasoning_content="think"), tool("call_a"), asst(), user()),
    ("deepseek", "empty reasoning_content (DS-4)"): reasoner(user(), asst_calls("call_a", reasoning_content=""),
                                                             tool("call_a")),
    ("deepseek", "non-thinking model needs no reasoning"): body(user(), asst_calls("call_a"), tool("call_a"),
                                                                model="deepseek-chat"),
    ("deepseek", "thinking disabled explicitly"): body(user(), asst_calls("call_a"), tool("call_a"),
                                                       model="deepseek-reasoner", thinking={"type": "disabled"}),
    ("anthropic", "null content on tool-call turn"): body(system(), user(), asst_calls("toolu_1"),
                                                          tool("toolu_1"), asst(), user()),
    ("anthropic", "text + tool calls"): body(user(), asst_calls("toolu_1", content="Checking."), tool("toolu_1")),
    ("gemini", "user first, \"\" content, signature echoed"): body(
        system(), user(), {"role": "assistant", "content": "", "tool_calls": [call("call_a", extra_content=SIG)]},
        tool("call_a"), asst()),
    ("openrouter", "Gemini 3 with its reasoning_details echoed"): body(
        user(), asst_calls("call_a", reasoning_details=DETAILS), tool("call_a"), asst(), model=GEMINI_3),
    ("ollama", "\"\" content on tool-call turn"): body(user(), asst_calls("call_a", content=""), tool("call_a")),
    ("xai", "\"\" content on tool-call turn"): body(user(), asst_calls("call_a", content=""), tool("call_a")),
    ("groq", "OpenAI schema only"): body(system(), user(name="ann"), asst_calls("call_a", name="bot"),
                                         tool("call_a", name="get_weather"), asst()),
    ("vllm", "content key everywhere"): body(user(), asst_calls("call_a"), tool("call_a")),
    ("vllm", "empty arguments become {} (VL-1)"): body(
        user(), {"role": "assistant", "content": None, "tool_calls": [call("call_a", arguments="")]},
        tool("call_a")),
}


@pytest.mark.parametrize("provider, history", [(p, h) for (p, _), h in VALID.items()],
                         ids=[f"{p}: {name}" for p, name in VALID])
def test_valid_histories_are_accepted(provider, history):
    assert provider_violations(history, provider) == []
    assert provider_error(history, provider) is None


def test_every_provider_has_valid_and_rejected_cases():
    assert {p for p, _ in VALID} == set(PROVIDERS)
    assert {case[0] for case in REJECTED.values()} == set(PROVIDERS)


# --------------------------------------------------------------------------------------------------
# rejected histories: (provider, history, rule, exact text, index)
# --------------------------------------------------------------------------------------------------

OAI_ORPHAN = ("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
              "'tool_calls'.")
MI_ID = "Tool call id was {} but must be a-z, A-Z, 0-9, with a length of 9."
DS3 = "The `reasoning_content` in the thinking mode must be passed back to the API."
GE4 = ("Function call is missing a thought_signature in functionCall parts. This is required for tools to work "
       "correctly, and missing thought_signature may lead to degraded model performance. Additional data, function "
       "call `default_api:get_weather` , position 2. Please refer to "
       "https://ai.google.dev/gemini-api/docs/thought-signatures for more details.")
GE3 = ("Please ensure that function call turn comes immediately after a user turn or after a function response "
       "turn.")
XA1 = "Invalid request content: Each message must have at least one content element."

REJECTED = {
    # openai: the plain strict profile
    "openai orphan": ("openai", body(user(), tool("call_a")), "OAI-1", OAI_ORPHAN, 1),
    "openai id of 41 chars": ("openai", body(user(), asst_calls("c" * 41), tool("c" * 41)), "OAI-8",
                              "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with "
                              "maximum length 40, but got a string with length 41 instead.", 1),
    # mistral
    "mistral tool -> user (MI-1)": ("mistral", body(user(), asst_calls(MID), tool(MID), user("next")), "MI-1",
                                    "Unexpected role 'user' after role 'tool'", 3),
    "mistral user -> tool (MI-1)": ("mistral", body(user(), tool(MID)), "MI-1",
                                    "Unexpected role 'tool' after role 'user'", 1),
    "mistral OpenAI-style id (MI-4)": ("mistral", body(user(), asst_calls("call_PTLP8xhu3uwZk4l3nlnrrJha"),
                                                       tool("call_PTLP8xhu3uwZk4l3nlnrrJha")),
                                       "MI-4", MI_ID.format("call_PTLP8xhu3uwZk4l3nlnrrJha"), 1),
    "mistral bad tool_call_id only (MI-4)": ("mistral", body(user(), asst_calls(MID), tool("abc")), "MI-4",
                                             MI_ID.format("abc"), 2),
    "mistral tool_call_id missing (MI-4)": ("mistral", body(user(), asst_calls(MID), {"role": "tool",
                                                                                     "content": "x"}),
                                            "MI-4", "Tool call id has to be defined.", 2),
    "mistral reasoning_content (MI-7)": ("mistral", body(user(), asst_calls(MID, reasoning_content="r"), tool(MID)),
                                         "MI-7", "Extra inputs are not permitted", 1),
    "mistral name on user (MI-7)": ("mistral", body(user(name="ann")), "MI-7", "Extra inputs are not permitted", 0),
    "mistral index in tool call (MI-7)": ("mistral", body(user(), {"role": "assistant", "content": None,
                                                                    "tool_calls": [call(MID, index=0)]}, tool(MID)),
                                          "MI-7", "Extra inputs are not permitted", 1),
    "mistral bad tool name (MI-8)": ("mistral", body(user(), asst_calls(MID), tool(MID, name="get weather")),
                                     "MI-8", "Function name was get weather but must be a-z, A-Z, 0-9, or contain "
                                     "underscores and dashes, with a maximum length of 64.", 2),
    "mistral consecutive call turns (MI-2)": ("mistral", body(user(), asst_calls(MID), asst_calls(MID2), tool(MID),
                                                              tool(MID2)),
                                              "MI-2", "Not the same number of function calls and responses", 2),
    "mistral unanswered call at the end (MI-2)": ("mistral", body(user(), asst_calls(MID, MID2), tool(MID)),
                                                  "MI-2", "Not the same number of function calls and responses", 1),
    "mistral unexpected id (MI-3)": ("mistral", body(user(), asst_calls(MID), tool(MID2)), "MI-3",
                                     f"Unexpected tool call id {MID2} in tool results", 2),
    "mistral empty assistant (MI-6)": ("mistral", body(user(), {"role": "assistant", "content": None}, user()),
                                       "MI-6", "Assistant message must have either content or tool_calls, but not "
                                       "none.", 1),
    "mistral last assistant (MI-5)": ("mistral", body(user(), asst("hi")), "MI-5",
                                      "Expected last role User or Tool (or Assistant with prefix True) for serving "
                                      "but got assistant", 1),
    # deepseek
    "deepseek missing reasoning_content (DS-3)": ("deepseek", reasoner(user(), asst_calls("call_a"), tool("call_a")),
                                                  "DS-3", DS3, 1),
    "deepseek thinking enabled in body (DS-3)": ("deepseek", body(user(), asst_calls("call_a"), tool("call_a"),
                                                                  model="deepseek-v4", thinking={"type": "enabled"}),
                                                 "DS-3", DS3, 1),
    "deepseek null reasoning_content (DS-3)": ("deepseek", reasoner(user(), asst_calls("call_a", reasoning_content=None),
                                                                    tool("call_a")), "DS-3", DS3, 1),
    "deepseek orphan (DS-1)": ("deepseek", body(user(), tool("call_a")), "DS-1",
                               "Messages with role 'tool' must be a response to a preceding message with "
                               "'tool_calls'", 1),
    "deepseek unanswered (DS-2)": ("deepseek", body(user(), asst_calls("call_a"), user()), "DS-2",
                                   "An assistant message with 'tool_calls' must be followed by tool messages "
                                   "responding to each 'tool_call_id'. (insufficient tool messages following "
                                   "tool_calls message)", 1),
    "deepseek empty tool_calls (DS-6)": ("deepseek", body(user(), {"role": "assistant", "content": "x",
                                                                   "tool_calls": []}), "DS-6",
                                         "Invalid 'messages[1].tool_calls': empty array. Expected an array with "
                                         "minimum length 1, but got an empty array instead.", 1),
    # anthropic
    "anthropic \"\" on tool-call turn (AN-4)": ("anthropic", body(user(), asst_calls("toolu_1", content=""),
                                                                  tool("toolu_1")),
                                                "AN-4", "messages: text content blocks must be non-empty", 1),
    "anthropic empty text part (AN-4)": ("anthropic", body({"role": "user", "content": [{"type": "text",
                                                                                         "text": ""}]}),
                                         "AN-4", "messages: text content blocks must be non-empty", 0),
    "anthropic unanswered (AN-1)": ("anthropic", body(system(), user(), asst_calls("toolu_1", "toolu_2"),
                                                      tool("toolu_1"), asst()),
                                    "AN-1", "messages.1: `tool_use` ids were found without `tool_result` blocks "
                                    "immediately after: toolu_2. Each `tool_use` block must have a corresponding "
                                    "`tool_result` block in the next message.", 2),
    "anthropic orphan (AN-2)": ("anthropic", body(user(), asst(), tool("toolu_9")),
                                "AN-2", "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` "
                                "blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` "
                                "block in the previous message.", 2),
    "anthropic duplicate ids (AN-3)": ("anthropic", body(user(), asst_calls("toolu_1"), tool("toolu_1"), user(),
                                                         asst_calls("toolu_1", content="again"), tool("toolu_1")),
                                       "AN-3", "messages.3.content.1: tool_use ids must be unique", 4),
    "anthropic index in tool call (AN-6)": ("anthropic", body(user(), {"role": "assistant", "content": None,
                                                                       "tool_calls": [call("toolu_1", index=0)]},
                                                              tool("toolu_1")),
                                            "AN-6", "messages.1.content.0.tool_use.index: Additional input is not "
                                            "allowed", 1),
    # gemini
    "gemini null content on tool-call turn (GE-6)": ("gemini", body(user(), asst_calls("call_a"), tool("call_a")),
                                                     "GE-6", "Expected string or list of content parts, got: null", 1),
    "gemini leading call turn (GE-3)": ("gemini", body(system(), asst_calls("call_a", content=""), tool("call_a"),
                                                       user()), "GE-3", GE3, 1),
    "gemini orphan (GE-1)": ("gemini", body(system(), user(), asst("ok"), tool("call_x")), "GE-1",
                             "* GenerateContentRequest.contents[2].parts[0].function_response.name: Name cannot be "
                             "empty.", 3),
    "gemini unanswered (GE-2)": ("gemini", body(user(), asst_calls("call_a", "call_b", content=""), tool("call_a"),
                                                user()),
                                 "GE-2", "Please ensure that the number of function response parts is equal to the "
                                 "number of function call parts of the function call turn.", 1),
    # openrouter: the OpenAI rules for what is not Gemini 3's (GE-8 needs what was emitted: below)
    "openrouter orphan": ("openrouter", body(user(), tool("call_a"), model=GEMINI_3), "OAI-1", OAI_ORPHAN, 1),
    # ollama
    "ollama null content (OL-1)": ("ollama", body(user(), asst_calls("call_a"), tool("call_a")), "OL-1",
                                   "invalid message content type: <nil>", 1),
    "ollama no content key (OL-1)": ("ollama", body(user(), {"role": "assistant", "tool_calls": [call("call_a")]},
                                                    tool("call_a")), "OL-1", "invalid message content type: <nil>", 1),
    # xai
    "xai null content (XA-1)": ("xai", body(user(), asst_calls("call_a"), tool("call_a")), "XA-1", XA1, 1),
    "xai [] content (XA-1)": ("xai", body(user(), asst_calls("call_a", content=[]), tool("call_a")), "XA-1", XA1, 1),
    "xai empty arguments (XA-2)": ("xai", body(user(), {"role": "assistant", "content": "",
                                                        "tool_calls": [call("initial_list_datasets", arguments="")]},
                                               tool("initial_list_datasets")),
                                   "XA-2", "The arguments to a tool_call with ID 'initial_list_datasets' are not a "
                                   'valid JSON string. Parsing error: Error("EOF while parsing a value", line: 1, '
                                   "column: 0)", 1),
    "xai truncated arguments (XA-2)": ("xai", body(user(), {"role": "assistant", "content": "",
                                                            "tool_calls": [call("call_a", arguments='{"city": "Par')]},
                                                   tool("call_a")),
                                       "XA-2", "The arguments to a tool_call with ID 'call_a' are not a valid JSON "
                                       'string. Parsing error: Error("EOF while parsing a string", line: 1, column: '
                                       "13)", 1),
    # groq
    "groq reasoning_content (GR-1)": ("groq", body(user(), asst_calls("call_a"), tool("call_a"),
                                                   asst("x", reasoning_content="r"), user()),
                                      "GR-1", "'messages.3' : for 'role:assistant' the following must be satisfied"
                                      "[('messages.3' : property 'reasoning_content' is unsupported)]", 3),
    "groq reasoning (GR-1)": ("groq", body(user(), asst("x", reasoning="r"), user()), "GR-1",
                              "'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : "
                              "property 'reasoning' is unsupported, did you mean 'role'?)]", 1),
    "groq timestamp (GR-1)": ("groq", body(user(timestamp=1)), "GR-1",
                              "'messages.0' : for 'role:user' the following must be satisfied[('messages.0' : "
                              "property 'timestamp' is unsupported)]", 0),
    "groq index in tool call (GR-1)": ("groq", body(user(), {"role": "assistant", "content": None,
                                                             "tool_calls": [call("call_a", index=0)]}, tool("call_a")),
                                       "GR-1", "'messages.1' : for 'role:assistant' the following must be satisfied"
                                       "[('messages.1.tool_calls.0' : property 'index' is unsupported)]", 1),
    "groq tool content parts (GR-2)": ("groq", body(user(), asst_calls("call_a"),
                                                    tool("call_a", [{"type": "text", "text": "x"}])),
                                       "GR-2", "'messages.2' : for 'role:tool' the following must be satisfied"
                                       "[('messages.2.content' : value must be a string)]", 2),
    "groq system content parts (GR-2)": ("groq", body({"role": "system", "content": [{"type": "text", "text": "x"}]},
                                                      user()),
                                         "GR-2", "'messages.0' : for 'role:system' the following must be satisfied"
                                         "[('messages.0.content' : value must be a string)]", 0),
    # vllm
    "vllm truncated arguments (VL-1)": ("vllm", body(user(), {"role": "assistant", "content": None,
                                                              "tool_calls": [call("call_a", arguments='{"a": 1')]},
                                                     tool("call_a")),
                                        "VL-1", "Expecting ',' delimiter: line 1 column 8 (char 7)", 1),
    "vllm array arguments (VL-2)": ("vllm", body(user(), {"role": "assistant", "content": None,
                                                          "tool_calls": [call("call_a", arguments='"x"')]},
                                                 tool("call_a")),
                                    "VL-2", "'str object' has no attribute 'items'", 1),
    "vllm content key missing (VL-4)": ("vllm", body(user(), {"role": "assistant", "tool_calls": [call("call_a")]},
                                                     tool("call_a")),
                                        "VL-4", "Failed to deserialize the JSON body into the target type: "
                                        "messages[1]: missing field `content`", 1),
}


@pytest.mark.parametrize("provider, history, rule, text, index", REJECTED.values(), ids=REJECTED.keys())
def test_each_provider_rule_rejects_with_its_id_and_exact_text(provider, history, rule, text, index):
    first = provider_first(history, provider)
    assert first is not None, "expected a violation"
    assert (first.rule, first.message, first.index) == (rule, text, index)
    status, error = provider_error(history, provider)
    assert status == (422 if rule == "MI-7" else 400)
    assert _error_message(provider, error) == text


def _error_message(provider: str, error) -> str:
    """The message of ``provider``'s error body (each provider has its own shape)."""
    if provider == "mistral":
        message = error["message"]
        return message if isinstance(message, str) else message["detail"][0]["msg"]
    if provider == "gemini":
        return error[0]["error"]["message"]
    if provider == "xai":
        return error["error"]
    return error["error"]["message"]


def test_openai_is_the_strict_profile_without_s12_vl2_and_s9():
    for history in [h for (p, _), h in VALID.items()] + [case[1] for case in REJECTED.values()]:
        assert provider_violations(history, "openai") == violations(history, skip=("S12", "VL-2", "S9"))


def test_tool_content_as_text_parts_is_refused_by_groq_mistral_and_vllm_only():
    history = body(user(), asst_calls("call_a"), dict(tool("call_a"), content=[{"type": "text", "text": "Rainy"}]))
    refusing = {p for p in PROVIDERS if any(v.rule in ("S9", "GR-2", "MI-9") for v in provider_violations(history, p))}
    assert refusing == {"groq", "mistral", "vllm"}


def test_universal_rules_still_apply_with_provider_wording_where_it_has_one():
    history = body(user(), asst_calls("call_a"), user("wait"), tool("call_a"))
    rules = {p: [v.rule for v in provider_violations(history, p)] for p in PROVIDERS}
    assert rules["openai"] == ["OAI-2", "OAI-1"]
    assert rules["deepseek"] == ["DS-2", "DS-1"]
    assert rules["anthropic"] == ["AN-1", "AN-2"]
    assert rules["gemini"][0] == "GE-6" and rules["gemini"][1:] == ["GE-2", "GE-3"]  # call_a declared before
    assert rules["vllm"] == ["OAI-2", "OAI-1"]
    mistral = provider_violations(body(user(), asst_calls(MID), user("wait"), tool(MID)), "mistral")
    assert [v.rule for v in mistral] == ["MI-1"]
    assert mistral[0].message == "Unexpected role 'tool' after role 'user'"


def test_content_null_versus_empty_string_split_the_providers():
    null = body(user(), asst_calls(MID, content=None), tool(MID))  # a 9-char id: valid for Mistral too
    empty = body(user(), asst_calls(MID, content=""), tool(MID))
    rejects_null = {p for p in PROVIDERS if provider_violations(null, p)}
    rejects_empty = {p for p in PROVIDERS if provider_violations(empty, p)}
    assert rejects_null == {"gemini", "ollama", "xai"}
    assert rejects_empty == {"anthropic"}


def test_closed_schemas_reject_what_deepseek_and_gemini_need():
    history = reasoner(user(), {"role": "assistant", "content": "", "reasoning_content": "r",
                                "tool_calls": [call(MID, extra_content=SIG)]}, tool(MID))
    assert provider_violations(history, "deepseek") == []
    assert provider_violations(history, "gemini") == []
    assert [v.rule for v in provider_violations(history, "groq")] == ["GR-1"]
    assert provider_first(history, "groq").message == (
        "'messages.1' : for 'role:assistant' the following must be satisfied[('messages.1' : property "
        "'reasoning_content' is unsupported), ('messages.1.tool_calls.0' : property 'extra_content' is unsupported)]")
    assert {v.param for v in provider_violations(history, "mistral")} == {
        "body.messages.1.assistant.reasoning_content", "body.messages.1.assistant.tool_calls.0.extra_content"}
    assert [v.rule for v in provider_violations(history, "anthropic")] == ["AN-6", "AN-4"]  # "" -> empty block


def test_deepseek_thinking_mode_detection():
    assert deepseek_thinking({"model": "deepseek-reasoner"})
    assert deepseek_thinking({"model": "kimi-k2-thinking"})
    assert deepseek_thinking({"model": "deepseek-chat", "thinking": {"type": "enabled"}})
    assert not deepseek_thinking({"model": "deepseek-reasoner", "thinking": {"type": "disabled"}})
    assert not deepseek_thinking({"model": "deepseek-chat"})
    assert deepseek_thinking({"model": "deepseek-v4-pro"}) and deepseek_thinking({"model": "kimi-k2.5"})
    assert not deepseek_thinking({"model": "kimi-k2-0905-preview"}) and not deepseek_thinking({"model": "qwen3-coder-plus"})
    carried = body(user(), asst_calls("call_a", reasoning_content="think"), tool("call_a"), model="deepseek-chat")
    assert deepseek_thinking(carried) and not deepseek_thinking({**carried, "thinking": {"type": "disabled"}})
    # reasoning is only required on tool-call turns
    assert provider_violations(reasoner(user(), asst("plain"), user()), "deepseek") == []


def test_gemini_thought_signature_needs_the_emitted_set():
    unsigned = body(user(), asst_calls("call_a", content=""), tool("call_a"))
    assert provider_violations(unsigned, "gemini") == []  # nothing emitted, nothing to enforce
    emitted = {"call_a": SIG}
    first = provider_first(unsigned, "gemini", emitted_signatures=emitted)
    assert (first.rule, first.message, first.index) == ("GE-4", GE4, 1)
    other = {"google": {"thought_signature": "b3RoZXI="}}
    tampered = body(user(), {"role": "assistant", "content": "",
                             "tool_calls": [call("call_a", extra_content=other)]}, tool("call_a"))
    assert provider_first(tampered, "gemini", emitted_signatures=emitted).rule == "GE-4"
    signed = body(user(), {"role": "assistant", "content": "", "tool_calls": [call("call_a", extra_content=SIG)]},
                  tool("call_a"))
    assert provider_violations(signed, "gemini", emitted_signatures=emitted) == []


def test_openrouter_gemini_3_needs_the_emitted_reasoning_details():
    emitted = {"call_a": DETAILS}
    dropped = body(user(), asst_calls("call_a"), tool("call_a"), model=GEMINI_3)
    assert provider_violations(dropped, "openrouter") == []  # nothing emitted, nothing to enforce
    first = provider_first(dropped, "openrouter", emitted_signatures=emitted)
    assert (first.rule, first.index) == ("GE-8", 1)
    status, error = provider_error(dropped, "openrouter", emitted_signatures=emitted)
    assert status == 400 and error["error"]["message"] == "Provider returned error"
    raw = error["error"]["metadata"]["raw"]
    assert raw.startswith("Gemini models require OpenRouter reasoning details to be preserved in each request.")
    assert GE4 in json.loads(raw.partition("Upstream error: ")[2])["error"]["message"]
    # The signature is what Gemini checks: the thought text alone does not do, the whole list does.
    thought_only = body(user(), asst_calls("call_a", reasoning_details=[THOUGHT]), tool("call_a"), model=GEMINI_3)
    assert provider_first(thought_only, "openrouter", emitted_signatures=emitted).rule == "GE-8"
    kept = body(user(), asst_calls("call_a", reasoning_details=DETAILS), tool("call_a"), model=GEMINI_3)
    assert provider_violations(kept, "openrouter", emitted_signatures=emitted) == []
    # Only the current turn is validated, and only Gemini 3 validates it.
    earlier = body(user(), asst_calls("call_a"), tool("call_a"), asst(), user("next"), model=GEMINI_3)
    assert provider_violations(earlier, "openrouter", emitted_signatures=emitted) == []
    for model in ("google/gemini-2.5-pro", "anthropic/claude-sonnet-4", "openai/gpt-5"):
        assert provider_violations(dict(dropped, model=model), "openrouter", emitted_signatures=emitted) == [], model


def test_error_body_shapes():
    orphan = body(user(), tool("call_a"))
    assert provider_error(orphan, "openai") == (400, {"error": {
        "message": OAI_ORPHAN, "type": "invalid_request_error", "param": "messages.[1].role", "code": None}})
    assert provider_error(orphan, "deepseek")[1]["error"]["code"] == "invalid_request_error"
    assert provider_error(orphan, "gemini")[1][0]["error"]["status"] == "INVALID_ARGUMENT"
    assert provider_error(body(user(), asst_calls("call_a"), tool("call_a")), "xai") == (
        400, {"code": "Client specified an invalid argument", "error": XA1})
    assert provider_error(orphan, "vllm")[1]["error"]["type"] == "BadRequestError"
    assert provider_error(body(user(), tool(MID)), "mistral") == (400, {
        "object": "error", "message": "Unexpected role 'tool' after role 'user'",
        "type": "invalid_request_message_order", "param": None, "code": "3230"})
    status, error = provider_error(body(user(name="ann"), asst("x", reasoning_content="r"), user()), "mistral")
    assert status == 422 and error["object"] == "error" and error["type"] == "invalid_request_error"
    assert error["message"]["detail"] == [
        {"type": "extra_forbidden", "loc": ["body", "messages", 0, "user", "name"],
         "msg": "Extra inputs are not permitted", "input": "ann"},
        {"type": "extra_forbidden", "loc": ["body", "messages", 1, "assistant", "reasoning_content"],
         "msg": "Extra inputs are not permitted", "input": "r"},
    ]


def test_skip_and_unknown_provider():
    history = body(user(), asst_calls("call_a"), tool("call_a"))
    assert provider_violations(history, "ollama", skip=("OL-1",)) == []
    with pytest.raises(ValueError):
        provider_violations(history, "nope")
    with pytest.raises(ValueError):
        make_strict_upstream(provider="nope")


# --------------------------------------------------------------------------------------------------
# provider-flavoured upstreams over a real uvicorn server
# --------------------------------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}},
]


@pytest.fixture(scope="module")
def upstreams():
    apps = {p: make_strict_upstream(provider=p, seed=11) for p in ("mistral", "deepseek", "gemini")}
    with serve(apps["mistral"][0]) as m, serve(apps["deepseek"][0]) as d, serve(apps["gemini"][0]) as g:
        clients = {p: httpx.Client(base_url=url, timeout=10) for p, url in
                   (("mistral", m), ("deepseek", d), ("gemini", g))}
        try:
            yield {p: (clients[p], apps[p][1]) for p in clients}
        finally:
            for c in clients.values():
                c.close()


def _ask(client, messages, model="test-model", **extra):
    return client.post("/v1/chat/completions", json={"model": model, "messages": messages, "tools": TOOLS, **extra})


def _stream(client, messages, model="test-model") -> tuple[dict, list[dict]]:
    """Assemble a streamed answer: (message, raw deltas)."""
    response = _ask(client, messages, model=model, stream=True)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    deltas = []
    for block in response.text.split("\n\n"):
        if block and block != "data: [DONE]":
            deltas.append(json.loads(block[len("data: "):])["choices"][0]["delta"])
    message: dict = {"content": None, "reasoning_content": None, "tool_calls": {}}
    for delta in deltas:
        for key in ("content", "reasoning_content"):
            if delta.get(key) is not None:
                message[key] = (message[key] or "") + delta[key]
        for piece in delta.get("tool_calls", []):
            entry = message["tool_calls"].setdefault(piece["index"], {"function": {"arguments": ""}})
            for key in ("id", "type", "extra_content"):
                if key in piece:
                    entry[key] = piece[key]
            if "name" in piece["function"]:
                entry["function"]["name"] = piece["function"]["name"]
            entry["function"]["arguments"] += piece["function"].get("arguments", "")
    message["tool_calls"] = [message["tool_calls"][i] for i in sorted(message["tool_calls"])]
    return message, deltas


def _replay(answer: dict, **overrides) -> dict:
    return {"role": "assistant", "content": answer.get("content"), "tool_calls": answer["tool_calls"], **overrides}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_mistral_upstream_emits_9_char_ids_and_enforces_mistral_rules(upstreams, stream):
    client, recorder = upstreams["mistral"]
    recorder.reset()
    if stream:
        answer, _ = _stream(client, [user()])
    else:
        answer = _ask(client, [user()]).json()["choices"][0]["message"]
        assert set(answer) == {"role", "content", "tool_calls"}  # no refusal/annotations (MI-7 on replay)
    ids = [c["id"] for c in answer["tool_calls"]]
    assert len(ids) == 2 and all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)
    assert [{k: c[k] for k in ("id", "type", "function")} for c in answer["tool_calls"]] == recorder.emitted_turns[-1]
    history = [user(), {"role": "assistant", "content": "", "tool_calls": recorder.emitted_turns[-1]},
               *(tool(i) for i in ids)]
    ok = _ask(client, history)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Received 2 tool results."
    bad = _ask(client, [*history, user("thanks")])
    assert bad.status_code == 400
    assert bad.json() == {"object": "error", "message": "Unexpected role 'user' after role 'tool'",
                          "type": "invalid_request_message_order", "param": None, "code": "3230"}
    extra = _ask(client, [user(), asst("x", reasoning_content="r"), user()])
    assert extra.status_code == 422
    assert extra.json()["message"]["detail"][0]["loc"] == ["body", "messages", 1, "assistant", "reasoning_content"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_deepseek_upstream_emits_reasoning_and_enforces_ds3_in_thinking_mode(upstreams, stream):
    client, recorder = upstreams["deepseek"]
    recorder.reset()
    model = "deepseek-reasoner"
    if stream:
        answer, deltas = _stream(client, [user()], model=model)
        reasoning_deltas = [d for d in deltas if "reasoning_content" in d]
        assert len(reasoning_deltas) > 1
        assert deltas.index(reasoning_deltas[-1]) < min(i for i, d in enumerate(deltas) if "tool_calls" in d)
    else:
        answer = _ask(client, [user()], model=model).json()["choices"][0]["message"]
    assert answer["reasoning_content"] == "The user needs data; calling get_weather, get_time."
    assert recorder.responses[-1]["reasoning_content"] == answer["reasoning_content"]
    calls = answer["tool_calls"]
    assert all(c["id"].startswith("call_") for c in calls) and calls == recorder.emitted_turns[-1]
    results = [tool(c["id"]) for c in calls]

    without = _ask(client, [user(), _replay(answer), *results], model=model)
    assert without.status_code == 400
    assert without.json() == {"error": {"message": DS3, "type": "invalid_request_error", "param": None,
                                        "code": "invalid_request_error"}}
    assert _ask(client, [user(), _replay(answer), *results], model="deepseek-chat").status_code == 200
    replayed = _ask(client, [user(), _replay(answer, reasoning_content=answer["reasoning_content"]), *results],
                    model=model)
    assert replayed.status_code == 200
    text = replayed.json()["choices"][0]["message"]
    assert text["content"] == "Received 2 tool results." and text["reasoning_content"]
    assert _ask(client, [user(), _replay(answer, reasoning_content=""), *results], model=model).status_code == 200


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_gemini_upstream_emits_thought_signatures_and_enforces_ge4(upstreams, stream):
    client, recorder = upstreams["gemini"]
    recorder.reset()
    if stream:
        answer, deltas = _stream(client, [user()])
        firsts = [p for d in deltas for p in d.get("tool_calls", []) if "id" in p]
        assert len(firsts) == 2 and all("extra_content" in p for p in firsts)
        rest = [p for d in deltas for p in d.get("tool_calls", []) if "id" not in p]
        assert rest and not any("extra_content" in p for p in rest)
    else:
        answer = _ask(client, [user()]).json()["choices"][0]["message"]
    assert answer["content"] == ""
    calls = answer["tool_calls"]
    signatures = [c["extra_content"]["google"]["thought_signature"] for c in calls]
    assert len(set(signatures)) == 2 and all(len(base64.b64decode(s, validate=True)) == 48 for s in signatures)
    assert calls == recorder.emitted_turns[-1]
    results = [tool(c["id"]) for c in calls]

    stripped = [{k: v for k, v in c.items() if k != "extra_content"} for c in calls]
    rejected = _ask(client, [user(), {"role": "assistant", "content": "", "tool_calls": stripped}, *results])
    assert rejected.status_code == 400
    error = rejected.json()
    assert isinstance(error, list) and error[0]["error"]["status"] == "INVALID_ARGUMENT"
    assert error[0]["error"]["message"].startswith("Function call is missing a thought_signature in functionCall parts.")
    assert "`default_api:get_weather` , position 2." in error[0]["error"]["message"]
    assert recorder.rejections[-1] == error

    ok = _ask(client, [user(), _replay(answer), *results])
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Received 2 tool results."
    null = _ask(client, [user(), _replay(answer, content=None), *results])
    assert null.json()[0]["error"]["message"] == "Expected string or list of content parts, got: null"


def test_default_upstream_keeps_openai_answers():
    app, recorder = make_strict_upstream(seed=3)
    with serve(app) as url:
        answer = httpx.post(f"{url}/v1/chat/completions", json=body(user(), tools=TOOLS), verify=TLS).json()
    message = answer["choices"][0]["message"]
    assert message["refusal"] is None and message["annotations"] == [] and message["content"] is None
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", c["id"]) and "extra_content" not in c
               for c in message["tool_calls"])
    assert "reasoning_content" not in message
