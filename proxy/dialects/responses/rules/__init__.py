"""Every rule a Responses API request goes through, in the order they run: the Responses pipeline.

What the previous response already holds goes first (TM401, before the view is read, see ``plan.py``); the structural
rules run over the view; the Responses API's own rules then run over the input items the view wrote back: duplicates,
then item ids (wrong ones deleted, ones memory knows the server never issued deleted, ones whose reasoning is gone
deleted), reasoning left with nothing to follow, and last what ``store: false`` forbids, so it also sees what the
earlier rules kept. The ``retry`` phases run on no request as the client sent it, only on what was sent when the
upstream refused it (``plan.retried``, ``plan.retried_unknown``). Each rule is one module with ``RULE``, a Bad/Good
docstring (one input item a line) and ``apply(ctx)``.
"""

from proxy.dialects.responses.rules import (
    bad_item_id,
    dangling_reasoning,
    duplicate_item,
    previous_response_items,
    previous_response_unanswered,
    reasoning_required,
    refused_reasoning,
    unissued_ids,
    unknown_item,
    unstored_ids,
)
from proxy.repair.pipeline import Phase, Pipeline
from proxy.repair.rules import STRUCTURAL, empty_history, long_call_id, split_parallel_turn

PIPELINE = Pipeline("responses", (
    Phase("resent", "over the input, before the view is read", (previous_response_items,)),
    # The structural rules but TM105 (a run of calls is one view entry already, and the turns the view keeps apart, each
    # run of reasoning and calls for adjacent profiles, are separate responses, which merging would leave with one
    # reasoning), then TM208 over the ids, with the Responses API's 64-character limit (RS-14).
    Phase("view", "over the neutral view of the input", (*(rule for rule in STRUCTURAL if rule is not split_parallel_turn), long_call_id)),
    Phase("items", "over the items the view wrote back", (
        previous_response_unanswered,
        duplicate_item,
        bad_item_id,
        unissued_ids,
        reasoning_required,
        dangling_reasoning,
        unstored_ids,
        empty_history,
    )),
    # Not on a request as the client sent it: on what was sent, after the upstream refused it. TM405 deletes the server
    # id of each item whose reasoning the first rule removed, TM406 drops reasoning left with nothing it produced.
    Phase("retry", "over what was sent, when the upstream could not verify encrypted reasoning (RS-11)",
          (refused_reasoning, reasoning_required, dangling_reasoning), checked=False),
    Phase("retry-unknown", "over what was sent, when the upstream did not know an item id (RS-8)",
          (unknown_item, reasoning_required, dangling_reasoning), checked=False),
))
