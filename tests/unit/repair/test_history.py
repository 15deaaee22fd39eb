"""``history.Pairing`` walks a history once with the vocabulary's tests written out (it runs over every message of a
repair); here it is held to that vocabulary: what ``is_call_turn``, ``block_end``, ``declared_ids``, ``is_tool`` and
``result_id`` say of the same messages, whatever shape a client gives them."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.repair.history import Pairing, block_end, declared_ids, is_assistant, is_call_turn, is_tool, result_id
from tests.support.hypothesis_budget import examples

IDS = st.sampled_from(["a", "b", "c", "", None, 3])
CALLS = st.one_of(st.none(), st.just("calls"), st.lists(st.one_of(st.builds(dict, id=IDS), st.just({}), st.just("call")), max_size=3))
MESSAGES = st.one_of(
    st.builds(dict, role=st.sampled_from(["assistant", "tool", "user", "system"]), tool_calls=CALLS, tool_call_id=IDS),
    st.builds(dict, role=st.just("tool")),
    st.just("not a message"),
    st.none(),
)


def spelled_out(messages: list[Any]) -> tuple[Any, ...]:
    """What the vocabulary says of ``messages``, in ``Pairing``'s fields."""
    turns = [(at, block_end(messages, at), declared_ids(m)) for at, m in enumerate(messages) if is_call_turn(m)]
    blocks = {position: turn for turn, end, _ in turns for position in range(turn + 1, end)}
    results = [(at, rid, blocks.get(at, -1)) for at, m in enumerate(messages) if is_tool(m) and (rid := result_id(m)) is not None]
    declared = [(cid, at) for at, m in enumerate(messages) if is_assistant(m) for cid in declared_ids(m)]
    repeated = len({cid for cid, _ in declared}) != len(declared)
    idless = any(is_tool(m) and result_id(m) is None for m in messages)
    return turns, results, dict(declared), repeated, any(is_tool(m) for m in messages), idless


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(MESSAGES, max_size=12))
def test_a_pairing_says_what_the_vocabulary_says(messages: list[Any]) -> None:
    pairing = Pairing(messages)
    assert (pairing.turns, pairing.results, pairing.declares, pairing.repeated, pairing.tools, pairing.idless) == spelled_out(messages)
