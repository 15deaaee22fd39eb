"""Every rule a Chat Completions request goes through, in the order they run: chat's pipeline.

One phase, over the messages as they are (they are the engine's own view). Order matters: the rules that give every
call and result an id come first, then the id rules, then the orphan rule (which needs every declared id), then the
call-shape rules (so calls re-inserted from memory are checked too), then the block rules; then the profile's own
rules (each names the profiles that run it), and TM210 last, the one decision about what they all left of the
history. The structural rules (``proxy/repair/rules/``) are every dialect's; the others are chat's, one module each
with ``RULE`` (code, name, provider rule ids), a Bad/Good docstring and ``apply(ctx)``.
"""

from proxy.dialects.chat.rules import (
    closed_schema_fields,
    content_key,
    empty_assistant_message,
    empty_string_content,
    empty_tool_calls,
    invalid_arguments,
    leading_call_turn,
    legacy_function_call,
    malformed_message,
    malformed_tool_call,
    missing_call_type,
    mistral_call_ids,
    mistral_role_bridge,
    non_object_arguments,
    null_content,
    object_arguments,
    reasoning_content,
    reasoning_details,
    system_not_first,
    thought_signature,
    tool_content_type,
    tool_image_parts,
)
from proxy.repair.pipeline import Phase, Pipeline, Step
from proxy.repair.rules import (
    duplicate_call_id,
    duplicate_tool_result,
    empty_history,
    interleaved_message,
    long_call_id,
    misplaced_tool_result,
    orphan_tool_message,
    split_parallel_turn,
    tool_result_without_id,
    unanswered_tool_call,
)

PIPELINE = Pipeline("chat", (
    Phase("repair", "over the messages", (
        malformed_message,
        legacy_function_call,
        empty_tool_calls,
        malformed_tool_call,
        tool_content_type,
        tool_result_without_id,
        split_parallel_turn,
        duplicate_call_id,
        orphan_tool_message,
        # After the orphan rule, so calls re-inserted from memory are held to the same shape.
        missing_call_type,
        object_arguments,
        invalid_arguments,
        interleaved_message,
        misplaced_tool_result,
        duplicate_tool_result,
        unanswered_tool_call,
        tool_image_parts,
        empty_assistant_message,
        long_call_id,
        # The profiles' own, after every rule all profiles run; each profile runs its own in this order.
        Step(mistral_call_ids, ("mistral",)),
        Step(mistral_role_bridge, ("mistral",)),
        Step(reasoning_content, ("deepseek",)),
        Step(null_content, ("anthropic",)),
        Step(thought_signature, ("gemini",)),
        Step(reasoning_details, ("openrouter",)),
        Step(empty_string_content, ("gemini", "ollama", "xai")),
        Step(leading_call_turn, ("gemini",)),
        Step(closed_schema_fields, ("mistral", "anthropic", "groq")),
        Step(non_object_arguments, ("vllm",)),
        Step(content_key, ("vllm",)),
        Step(system_not_first, ("vllm",)),
        # After every other rule, the profile's included: the one decision about what they left of the history.
        empty_history,
    )),
))
