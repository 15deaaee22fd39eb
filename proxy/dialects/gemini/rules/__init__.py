"""The Gemini rules, in the order they run, around the structural rules.

The ``contents`` phase runs over ``contents`` as sent: roles first (GN-5), then empty parts and contents (GN-10), so that
what is left of a model content is judged; a call's empty name from memory (GN-7), so that the view pairs its response
with a named call; responses out of a model content (GN-4), and consecutive model contents merged (GN-3), so that the
view reads one assistant entry per call turn. The structural rules then pair calls and responses over the view
(``view.py``): an orphan response gets its call content back from memory (TM101, GN-1/GN-2),
responses move next to their calls (TM102, TM103, GN-2), duplicate ids are renamed (TM107, GN-8), an unanswered call
gets a placeholder response (TM104, GN-1); TM606 gives each response its call's name (GN-7). The ``written`` phase runs
over the contents the view wrote back: model contents the structural rules left side by side merged (GN-3), other parts
out of a response content (GN-1), then the responses of one call content into one content (GN-1), ids by endpoint
(GN-9), then thought signatures restored from memory (GN-11), and what memory did not hold to the policy (GN-11), so
that it judges the calls as they will be sent; a user content before a history left opening with calls (GN-3), and,
when the operator opts in, one after a history that ends with the model's text (GN-6), last. The ``retry`` phase runs
on no request as the client sent it, only on what was sent when the upstream refused a thought signature (GN-12,
``plan.retried``).

Each rule is one module with ``RULE``, a Bad/Good docstring (one content a line; a ``Request:`` line gives the
request's target, ``family`` and ``model``, which are not body fields) and ``apply(ctx)``; ``edit.py`` holds what they
share. GN-6 (a history ending with a model turn): a trailing call content gets placeholder responses (TM104), a
trailing empty one is removed (TM607), and a trailing text answer (a prefill) is sent as it is unless the operator opts
into TM614.
"""

from proxy.dialects.gemini.rules import (
    adjacent_model,
    empty_parts,
    endpoint_ids,
    leading_call_turn,
    legacy_role,
    mixed_call_turn,
    refused_signature,
    remembered_call_name,
    response_name,
    response_siblings,
    split_responses,
    thought_signature,
    trailing_model_content,
    unsigned_call,
)
from proxy.repair.pipeline import Phase, Pipeline
from proxy.repair.rules import (
    duplicate_call_id,
    duplicate_tool_result,
    empty_history,
    interleaved_message,
    misplaced_tool_result,
    orphan_tool_message,
    unanswered_tool_call,
)

PIPELINE = Pipeline("gemini", (
    Phase("contents", "over contents as sent, so that the view reads one model entry per call turn",
          (legacy_role, empty_parts, remembered_call_name, mixed_call_turn, adjacent_model)),
    # The structural rules in chat's order, then TM606 over the pairs they leave. Not TM105 (the contents phase merged
    # consecutive model contents, TM603) nor TM106 (the view pairs every response with an id, its own or a view id).
    Phase("view", "over the neutral view of the contents", (duplicate_call_id, orphan_tool_message, interleaved_message,
                                                            misplaced_tool_result, duplicate_tool_result, unanswered_tool_call,
                                                            response_name)),
    # TM603 runs again first: an orphan response the policy dropped may leave two model contents side by side.
    Phase("written", "over the contents the view wrote back, signatures last", (
        adjacent_model, response_siblings, split_responses, endpoint_ids, thought_signature, unsigned_call, leading_call_turn,
        trailing_model_content, empty_history)),
    # Not on a request as the client sent it: on what was sent, after the upstream refused a thought signature.
    Phase("retry", "over what was sent, when the upstream refused a thought signature (GN-12)", (refused_signature,), checked=False),
))
