"""The universal repair rules, in the order they run.

Order matters: the rules that give every call and result an id come first, then the id rules, then the
orphan rule (which needs every declared id), then the call-shape rules (so calls re-inserted from memory
are checked too), then the block rules, and cleanup last; ``FINAL`` runs after the profile's rules too.
Each rule
is one module with ``RULE`` (code, name, provider rule ids), a Bad/Good docstring and ``apply(ctx)``.
"""

from proxy.repair.rule import RepairRule
from proxy.repair.rules import (
    duplicate_call_id,
    duplicate_tool_result,
    empty_assistant_message,
    empty_history,
    empty_tool_calls,
    interleaved_message,
    invalid_arguments,
    legacy_function_call,
    long_call_id,
    malformed_message,
    malformed_tool_call,
    misplaced_tool_result,
    missing_call_type,
    object_arguments,
    orphan_tool_message,
    split_parallel_turn,
    tool_content_type,
    tool_image_parts,
    tool_result_without_id,
    unanswered_tool_call,
)

UNIVERSAL: tuple[RepairRule, ...] = (
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
)

#: The structural rules, in chat's order: what every dialect runs over its neutral view (pairing calls and
#: results: TM101-TM108). Each dialect adds its own around them; where results may stand is the profile's.
STRUCTURAL: tuple[RepairRule, ...] = (
    tool_result_without_id,
    split_parallel_turn,
    duplicate_call_id,
    orphan_tool_message,
    interleaved_message,
    misplaced_tool_result,
    duplicate_tool_result,
    unanswered_tool_call,
)

# After every other rule, the profile's included: the one decision about what they left of the history.
FINAL: tuple[RepairRule, ...] = (empty_history,)
