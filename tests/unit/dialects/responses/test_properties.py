"""Property tests of the Responses repair: valid item histories, broken the ways the catalogue describes, repaired.

* ``histories()`` plays a conversation with a strict reasoning server: user (and developer) messages, responses of
  a reasoning item and 1-3 parallel ``function_call`` / ``custom_tool_call`` items, their outputs in any order,
  responses of a reasoning item and an assistant message. Each response is stored in a ``ServerState`` (unless
  ``store: false``) and captured by toolmend's own capture (``turns_from_json``) into what memory holds; the
  client keeps every item, with ids (stored) or without (``store: false``, as Codex does).
* ``BREAKERS`` break a history the catalogue's ways, 1-3 at a time: call items dropped (with or without their
  reasoning), outputs dropped, an output moved before its call, a developer message between a call and its
  output, an item duplicated, an id of the wrong prefix or characters, ``store: false`` with ids, a trailing
  reasoning item, a reasoning item dropped from before its calls, a session that forgets reasoning (and calls)
  but keeps an assistant message with its id (RS-5).
* The properties: a repaired input is accepted by the strict validator (with the state of what the server
  stored), loses no output, message or text, gives back each remembered call byte for byte, does not touch
  its input and needs no second repair; a valid history needs nothing (no plan, or a plan that finds nothing).

Deterministic like ``tests/unit/dialects/chat/test_properties.py`` (the ``ci`` hypothesis profile of tests/conftest.py),
and small: the file runs in a few seconds.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.responses import RESPONSES
from proxy.dialects.responses.capture import turns_from_json
from proxy.dialects.responses.items import call_id_of, is_call, is_output, output_type_for
from proxy.repair import Policy, Profile, Result
from proxy.turns import Turn
from tests.support.hypothesis_budget import examples
from tests.support.pairing_check import checked_pairings
from tests.support.responses_validator import ServerState, violations

OPENAI = RESPONSES.profile("openai")
ADJACENT = RESPONSES.profile("deepseek")  # each output right after its call (RS-17)
HEX = "0123456789abcdef"
# Texts never contain the brackets of the unique tag each one ends with, so a tag names its text wherever it went.
CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="⟦⟧")


def config(default: int) -> settings:
    return settings(max_examples=examples(default), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


# --------------------------------------------------------------------------------------------------
# valid histories: a conversation with a strict reasoning server, and what toolmend remembered of it
# --------------------------------------------------------------------------------------------------


@dataclass
class Case:
    """A history (``body``), what the server stored answering it (``state``), what toolmend captured
    (``memory``, by every id a turn is recalled by), the output lists with calls as the server sent them
    (``emitted``), and what the breakers did (``breakers``; ``dropped``: the call items they removed)."""

    body: dict[str, Any]
    state: ServerState
    memory: dict[str, Turn]
    emitted: list[list[dict[str, Any]]]
    draw: Callable[[Any], Any] = field(repr=False)
    count: int = 0
    breakers: list[str] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def items(self) -> list[Any]:
        return self.body["input"]

    @property
    def stored(self) -> bool:
        return self.body.get("store") is not False

    def fresh(self, prefix: str, length: int = 50) -> str:
        """An id of the server's shape, unique in the case (a counter, so no two examples collide either)."""
        self.count += 1
        return prefix + format(self.count, "x").rjust(length, "0")

    def text(self) -> str:
        self.count += 1
        return self.draw(st.text(CHARS, max_size=8)) + f"⟦{self.count}⟧"

    def recall(self, ids: list[str]) -> dict[str, Turn]:
        return {key: self.memory[key] for key in ids if key in self.memory}


def _reasoning(case: Case, encrypted: bool) -> dict[str, Any]:
    item: dict[str, Any] = {"id": case.fresh("rs_"), "type": "reasoning", "summary": []}
    if encrypted:
        item["encrypted_content"] = "gAAAAA" + case.fresh("", 40)
    return item


def _call(case: Case, kind: str, n: int) -> dict[str, Any]:
    call_id = "call_" + case.fresh("", 24)
    if kind == "custom_tool_call":
        return {"id": case.fresh("ctc_"), "type": kind, "status": "completed", "call_id": call_id, "input": case.text(), "name": "apply_patch"}
    return {"id": case.fresh("fc_"), "type": kind, "status": "completed", "arguments": orjson.dumps({"n": n, "q": case.text()}).decode(),
            "call_id": call_id, "name": "get_weather"}


def _message(case: Case) -> dict[str, Any]:
    return {"id": case.fresh("msg_"), "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": case.text()}]}


def _respond(case: Case, output: list[dict[str, Any]]) -> None:
    """The server answers ``output``: it stores the response, toolmend captures it, the client keeps its items."""
    response_id = case.fresh("resp_")
    if case.stored:
        case.state.remember(response_id, copy.deepcopy(case.items), copy.deepcopy(output))
    for turn in turns_from_json(orjson.dumps({"object": "response", "id": response_id, "output": output})):
        case.emitted.append(copy.deepcopy(output))
        case.memory.update(dict.fromkeys(turn.get("ids", []), turn))
    case.items.extend(copy.deepcopy(item) if case.stored else _without_id(item) for item in output)


def _without_id(item: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in item.items() if key != "id"}


@st.composite
def histories(draw: Callable[[Any], Any], rounds: int = 3) -> Case:
    """A valid conversation of 1-3 episodes, each a user message and up to ``rounds`` responses with calls (function
    and custom tool calls in any order), their outputs in any order, and maybe a response with a message."""
    stored = draw(st.booleans())
    encrypted = not stored or draw(st.booleans())  # store: false replays reasoning only by its encrypted content
    body: dict[str, Any] = {"model": "gpt-5.5", "input": []}
    if not stored:
        body["store"] = False
    if draw(st.booleans()):
        body["tools"] = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}, {"type": "custom", "name": "apply_patch"}]
    case = Case(body, ServerState(), {}, [], draw)
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 4)) == 0:
            case.items.append({"role": "developer", "content": case.text()})
        case.items.append({"role": "user", "content": case.text()})
        for _ in range(draw(st.integers(0, rounds))):
            kinds = draw(st.lists(st.sampled_from(("function_call", "custom_tool_call")), min_size=1, max_size=3))
            calls = [_call(case, kind, n) for n, kind in enumerate(kinds)]
            _respond(case, [_reasoning(case, encrypted), *calls] if draw(st.integers(0, 4)) else calls)
            outputs = [{"type": output_type_for(call["type"]), "call_id": call["call_id"], "output": case.text()} for call in calls]
            case.items.extend(draw(st.permutations(outputs)))
        if draw(st.booleans()):
            _respond(case, [_reasoning(case, encrypted), _message(case)])
    return case


# --------------------------------------------------------------------------------------------------
# breakers
# --------------------------------------------------------------------------------------------------


def _positions(case: Case, test: Callable[[Any], bool]) -> list[int]:
    return [i for i, item in enumerate(case.items) if test(item)]


def drop_calls(case: Case) -> None:
    """A forgetful client keeps only the outputs of a response's calls, and maybe its reasoning (wherever it stood:
    before the outputs, a developer message, the next user message or nothing)."""
    turns = [output for output in case.emitted if any(call_id_of(item) in _call_ids(case) for item in output)]
    if not turns:
        return
    output = case.draw(st.sampled_from(turns))
    calls = {call_id_of(item) for item in output if is_call(item)}
    case.dropped += [item for item in output if is_call(item) and call_id_of(item) in _call_ids(case)]
    kept = [item for item in case.items if not (is_call(item) and call_id_of(item) in calls)]
    if not case.draw(st.booleans()):
        kept = [item for item in kept if not _is_reasoning_of(item, output)]
    case.items[:] = kept


def _call_ids(case: Case) -> set[str | None]:
    return {call_id_of(item) for item in case.items if is_call(item)}


def _is_reasoning(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "reasoning"


def _is_reasoning_of(item: Any, output: list[dict[str, Any]]) -> bool:
    """The client's copy of a reasoning item of ``output``: the item itself, or under store: false the item without
    its id (then told apart from the others by its encrypted content)."""
    return _is_reasoning(item) and any(item == made or ("id" not in item and _without_id(item) == _without_id(made))
                                       for made in output if _is_reasoning(made))


def drop_outputs(case: Case) -> None:
    """Interrupted tools: some outputs never made it into the history."""
    outputs = _positions(case, is_output)
    if outputs:
        for position in sorted(case.draw(st.lists(st.sampled_from(outputs), min_size=1, max_size=2, unique=True)), reverse=True):
            del case.items[position]


def output_before_call(case: Case) -> None:
    """A persistence race: an output stored anywhere before its call (right after a reasoning item too)."""
    outputs = [i for i in _positions(case, is_output) if call_id_of(case.items[i]) in _call_ids(case)]
    if not outputs:
        return
    output = case.items.pop(case.draw(st.sampled_from(outputs)))
    call = next(i for i, item in enumerate(case.items) if is_call(item) and call_id_of(item) == call_id_of(output))
    case.items.insert(case.draw(st.integers(0, call)), output)


def interleave_developer(case: Case) -> None:
    """A hook adds a developer message between a call and its output (OpenAI takes it; DeepSeek does not, RS-17)."""
    calls = _positions(case, is_call)
    if calls:
        case.items.insert(case.draw(st.sampled_from(calls)) + 1, {"role": "developer", "content": case.text()})


def duplicate_item(case: Case) -> None:
    """A replayed block: an item twice (RS-9 when it carries an id; a reasoning item twice is RS-6 as well)."""
    if case.items:
        position = case.draw(st.integers(0, len(case.items) - 1))
        case.items.insert(position + 1, copy.deepcopy(case.items[position]))


def wrong_id(case: Case) -> None:
    """A gateway rewrote an id: the wrong prefix for the item's type (RS-12) or characters the server never uses (RS-13),
    a reasoning item's too (then what it produced is refused with its own id, RS-4, RS-5)."""
    with_ids = _positions(case, lambda item: isinstance(item, dict) and "id" in item)
    if with_ids:
        item = case.items[case.draw(st.sampled_from(with_ids))]
        item["id"] = case.draw(st.sampled_from(("item_", "call_", "3f2a9c1e-", "msg-proxy.", "fc|"))) + case.fresh("", 24)


def store_false_with_ids(case: Case) -> None:
    """A stateless client (store: false) that kept the server's ids: only what must be looked up fails (RS-7)."""
    if any(isinstance(item, dict) and "id" in item for item in case.items):
        case.body["store"] = False


def trailing_reasoning(case: Case) -> None:
    """A response cut off after its reasoning item; the client kept the reasoning (RS-6)."""
    reasoning = _reasoning(case, encrypted=True)
    if case.stored:
        case.state.remember(case.fresh("resp_"), copy.deepcopy(case.items), [copy.deepcopy(reasoning)])
    case.items.append(reasoning if case.stored else _without_id(reasoning))


def drop_reasoning(case: Case) -> None:
    """A handoff filter removed the reasoning before a response's calls, leaving the calls, function or custom (RS-4
    when they carry ids)."""
    before_calls = [i for i in _positions(case, _is_reasoning) if _run_after(case.items, i)]
    if before_calls:
        del case.items[case.draw(st.sampled_from(before_calls))]


def _run_after(items: list[Any], position: int) -> list[dict[str, Any]]:
    """The call items right after ``position``."""
    run = []
    for item in items[position + 1:]:
        if not is_call(item):
            break
        run.append(item)
    return run


def forget_reasoning_keep_message(case: Case) -> None:
    """A session store that keeps the conversation's messages: it forgets the reasoning of an assistant message made
    with reasoning (RS-5: the message keeps its ``msg_`` id), maybe every reasoning item and call item too, and
    maybe the outputs with the calls (a chat-only memory)."""
    messages = _positions(case, lambda item: isinstance(item, dict) and item.get("type") == "message" and "id" in item)
    reasoned = [i for i in messages if i and _is_reasoning(case.items[i - 1])]
    if not reasoned:
        return
    how = case.draw(st.sampled_from(("its reasoning", "reasoning and calls", "reasoning, calls and outputs")))
    if how == "its reasoning":
        del case.items[case.draw(st.sampled_from(reasoned)) - 1]
        return
    forgotten = _call_ids(case)
    case.dropped += [made for emitted in case.emitted for made in emitted if is_call(made) and call_id_of(made) in forgotten]
    case.items[:] = [item for item in case.items if not (_is_reasoning(item) or is_call(item) or (
        how == "reasoning, calls and outputs" and is_output(item) and call_id_of(item) in forgotten))]


BREAKERS: dict[str, Callable[[Case], None]] = {breaker.__name__: breaker for breaker in (
    drop_calls, drop_outputs, output_before_call, interleave_developer, duplicate_item, wrong_id, store_false_with_ids,
    trailing_reasoning, drop_reasoning, forget_reasoning_keep_message)}


@st.composite
def broken(draw: Callable[[Any], Any], breakers: tuple[str, ...] = tuple(BREAKERS), rounds: int = 3) -> Case:
    case = draw(histories(rounds=rounds))
    # modulo, not sampled_from: hypothesis favours index 0, and every breaker deserves its share
    for pick in draw(st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=3)):
        name = breakers[pick % len(breakers)]
        BREAKERS[name](case)
        case.breakers.append(name)
    if not case.items:
        case.items.append({"role": "user", "content": case.text()})  # a history is never empty
    return case


# --------------------------------------------------------------------------------------------------
# the repair as the proxy runs it, and what must survive it
# --------------------------------------------------------------------------------------------------


def repaired(body: dict[str, Any], case: Case, profile: Profile = OPENAI) -> Result:
    """What the proxy does: plan, recall only what the plan names, repair with those turns (the default policy)."""
    planned = RESPONSES.plan(body, profile)
    return Result(body, ()) if planned is None else planned.repair(case.recall(planned.recall), Policy())


def _texts(items: list[Any]) -> Iterator[str]:
    for item in items:
        if is_output(item):
            yield item["output"]
        elif isinstance(item, dict) and item.get("role") in ("user", "developer"):
            yield item["content"]
        elif isinstance(item, dict) and item.get("type") == "message":
            yield from (part["text"] for part in item["content"])


def _reasoning_needs_the_store(case: Case, call: dict[str, Any]) -> bool:
    """Under ``store: false``: whether the reasoning item ``call`` was emitted with has no ``encrypted_content``."""
    if case.stored:
        return False
    for emitted in case.emitted:
        if call in emitted:
            before = [item for item in emitted[:emitted.index(call)] if item.get("type") == "reasoning"]
            return bool(before) and not before[-1].get("encrypted_content")
    return False


def check_repair(case: Case, profile: Profile = OPENAI, validator_profile: str = "openai") -> Result:
    sent = copy.deepcopy(case.body)
    with checked_pairings():
        result = repaired(case.body, case, profile)
    assert case.body == sent, "the repair changed its input"
    assert result.rejected is None
    out = result.body["input"]
    assert violations(result.body, case.state, validator_profile) == [], (case.breakers, out)
    if validator_profile != "openai":
        assert violations(result.body, case.state) == []  # adjacency is on top of what every server wants
    assert set(_texts(case.items)) <= set(_texts(out)), "an output, a message or a text was lost"
    people = [item for item in case.items if isinstance(item, dict) and item.get("role") in ("user", "developer")]
    assert [item for item in out if isinstance(item, dict) and item.get("role") in ("user", "developer")] == people
    # Each remembered call the client dropped is back, exactly as the server sent it (its id too: under store: false
    # an item that carries its content is taken with it), but for the id of a call whose remembered reasoning needs
    # the server's store (store: false, no encrypted_content: TM407 drops it, and TM405 the id it would be refused
    # without).
    answered = {call_id_of(item) for item in case.items if is_output(item)}
    encoded = {orjson.dumps(item) for item in out}
    for call in case.dropped:
        if call_id_of(call) in answered and call_id_of(call) in case.memory:
            expected = _without_id(call) if _reasoning_needs_the_store(case, call) else call
            assert orjson.dumps(expected) in encoded, call_id_of(call)
    again = repaired(result.body, case, profile)
    assert again.findings == (), ("not idempotent", case.breakers, [f.code for f in again.findings])
    return result


# --------------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------------


@config(60)
@given(case=histories())
def test_generated_histories_are_valid_and_need_nothing(case: Case) -> None:
    assert violations(case.body, case.state) == []
    result = repaired(case.body, case)
    assert result.findings == () and result.body is case.body


@config(250)
@given(case=broken())
def test_a_broken_history_is_repaired_into_one_the_server_accepts_losing_nothing(case: Case) -> None:
    check_repair(case)


@config(80)
@given(case=broken(breakers=("drop_calls",)))
def test_dropped_calls_come_back_byte_identical_with_their_reasoning(case: Case) -> None:
    result = check_repair(case)
    out = result.body["input"]
    for emitted in case.emitted:
        if any(call in case.dropped for call in emitted):
            assert any(out[i:i + len(emitted)] == emitted for i in range(len(out))), "the turn is not back whole, in order"


@config(80)
@given(case=broken(breakers=("drop_calls", "drop_outputs", "output_before_call", "interleave_developer")))
def test_for_servers_that_want_each_output_right_after_its_call(case: Case) -> None:
    check_repair(case, ADJACENT, "deepseek")


# --------------------------------------------------------------------------------------------------
# engine bugs the properties found (proxy/dialects/responses is not this file's to fix), each pinned by its
# minimal reproducer: the fixed ones as regressions, the open ones as strict xfails
# --------------------------------------------------------------------------------------------------

USER = {"role": "user", "content": "Patch it and check the weather"}
RS_1 = {"id": "rs_1", "type": "reasoning", "summary": []}
RS_2 = {"id": "rs_2", "type": "reasoning", "summary": []}
FC_1 = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
FC_2 = {"id": "fc_2", "type": "function_call", "call_id": "call_2", "name": "get_weather", "arguments": "{\"n\": 2}"}
CTC_1 = {"id": "ctc_1", "type": "custom_tool_call", "call_id": "call_1", "name": "apply_patch", "input": "*** Begin Patch"}
MSG_1 = {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}


def _out(call: dict[str, Any], text: str = "ok") -> dict[str, Any]:
    return {"type": output_type_for(call["type"]), "call_id": call["call_id"], "output": text}


def served(*outputs: list[dict[str, Any]], store: bool = True) -> Case:
    """A case whose server answered ``outputs`` in turn (stored unless ``store`` is False), captured by toolmend;
    its input is set by the test."""
    case = Case({"model": "gpt-5.5", "input": [], **({} if store else {"store": False})}, ServerState(), {}, [],
                lambda strategy: strategy.example())
    for output in outputs:
        _respond(case, [copy.deepcopy(item) for item in output])
    return case


def _accepted(case: Case, items: list[Any], profile: Profile = OPENAI, validator: str = "openai") -> Result:
    case.body["input"] = items
    result = repaired(case.body, case, profile)
    assert violations(result.body, case.state, validator) == []
    return result


# Fixed; regression R1: TM405 takes a function_call after a custom_tool_call of the same response for one without
# reasoning and deletes its id from a valid history
def test_bug_r1_a_valid_history_with_a_function_call_after_a_custom_call_is_untouched() -> None:
    case = served([RS_1, CTC_1, FC_2])
    case.body["input"] = [USER, RS_1, CTC_1, FC_2, _out(CTC_1), _out(FC_2)]
    assert violations(case.body, case.state) == []
    assert repaired(case.body, case).findings == ()


# Fixed; regression R2: TM404 deletes a reasoning item's wrong-prefix id but leaves the ids of the items it produced,
# which the server then refuses without it (RS-5, RS-4)
@pytest.mark.parametrize("produced", [MSG_1, FC_1], ids=["message", "function_call"])
def test_bug_r2_a_reasoning_id_of_the_wrong_prefix(produced: dict[str, Any]) -> None:
    case = served([RS_1, produced])
    rewritten = {**RS_1, "id": "item_1"}  # a gateway's id (RS-12)
    _accepted(case, [USER, rewritten, produced, *([_out(produced)] if is_call(produced) else [])])


# Fixed; regression R3: an output stored before its call, between a reasoning item and the message it produced, takes
# the reasoning along when it is moved after its call: the message is refused (RS-5)
def test_bug_r3_an_output_moved_away_leaves_the_reasoning_where_it_was() -> None:
    case = served([RS_1, MSG_1], [FC_2])
    _accepted(case, [USER, RS_1, _out(FC_2), MSG_1, USER, FC_2])


# Fixed; regression R4: TM405 deletes the server id of a function_call whose reasoning is gone, not that of a
# custom_tool_call (ctc_), which the server refuses the same way (RS-4)
def test_bug_r4_a_custom_call_without_its_reasoning() -> None:
    case = served([RS_1, CTC_1])
    _accepted(case, [USER, CTC_1, _out(CTC_1)])


# Fixed; regression R5: for adjacent profiles (deepseek, kimi), two unanswered call runs with only reasoning between
# them are one turn: the first run's placeholders go after the second, its reasoning between a call and its output
# (RS-17)
def test_bug_r5_placeholders_right_after_their_own_run() -> None:
    case = served(store=False)
    first, second = ({**_without_id(rs), "encrypted_content": f"gAAAAA{n}"} for n, rs in enumerate((RS_1, RS_2)))
    _accepted(case, [USER, first, _without_id(FC_1), second, _without_id(FC_2)], ADJACENT, "deepseek")  # both interrupted


# Fixed; regression R6: a reasoning item followed by another reasoning item is kept (TM406 counts reasoning as
# produced by the first); the strict validator refuses it (RS-6): engine and validator disagree
def test_bug_r6_reasoning_followed_by_reasoning() -> None:
    case = served(store=False)
    encrypted = {**_without_id(RS_1), "encrypted_content": "gAAAAA1"}
    _accepted(case, [USER, encrypted, {**encrypted, "encrypted_content": "gAAAAA2"}, _without_id(MSG_1)])


# Fixed; regression R7: a kept reasoning item not right before the orphan outputs (a developer message between) is
# the first copy TM403 keeps; TM406 then drops it as dangling, and the calls put back from memory lose their
# reasoning and (TM405) their ids
def test_bug_r7_calls_put_back_keep_their_reasoning() -> None:
    case = served([RS_1, FC_1, FC_2])
    note = {"role": "developer", "content": "hook: formatted"}
    result = _accepted(case, [USER, RS_1, note, _out(FC_1), _out(FC_2)])
    out = result.body["input"]
    assert any(out[i:i + 3] == [RS_1, FC_1, FC_2] for i in range(len(out))), "the turn did not come back whole"


# Fixed; regression R8: for adjacent profiles a call run right before another response's reasoning and calls was
# merged with it; the first run's reasoning was dropped as dangling and its calls kept their ids without it (RS-4)
def test_bug_r8_adjacent_runs_keep_their_own_reasoning() -> None:
    case = served([RS_1, FC_1], [RS_2, FC_2])
    result = _accepted(case, [USER, RS_1, FC_1, RS_2, FC_2, _out(FC_2)], ADJACENT, "deepseek")  # call_1 interrupted
    assert violations(result.body, case.state) == []  # was RS-4: fc_1 without its reasoning rs_1


# Fixed; regression R9: TM405 took an item for reasoned when any reasoning item stood earlier in its run, not only its
# own: a call of a second response whose reasoning was dropped, right after the first response's reasoned calls
# (their outputs missing), and an assistant message whose reasoning was forgotten, right after a reasoned call,
# kept their server ids without their reasoning item (RS-4, RS-5). Now TM405 checks each item's own reasoning, from
# memory, whenever the request is repaired. (When nothing else is wrong the items are not looked up: a valid-looking
# input is not made to wait for the store.)
MSG_2 = {**MSG_1, "id": "msg_2"}


@pytest.mark.parametrize("produced", [FC_2, MSG_2], ids=["function_call", "message"])
def test_bug_r9_an_item_after_another_responses_reasoned_calls(produced: dict[str, Any]) -> None:
    case = served([RS_1, FC_1], [RS_2, produced])
    # call_1 interrupted, rs_2 dropped: got the input's ids back (plus call_1's placeholder), refused for want of rs_2
    _accepted(case, [USER, RS_1, FC_1, produced, *([_out(produced)] if is_call(produced) else [])])


# Not a bug; pinned from the property above (its claim was too strong): a client that turned store off after a stored
# answer whose reasoning carries no encrypted_content, and dropped the calls. The calls come back from memory whole but
# for their ids: the reasoning needs the store (TM407 drops it), and the ids would be refused without it (TM405, RS-4)
def test_calls_put_back_under_store_false_lose_the_ids_their_unusable_reasoning_would_need() -> None:
    case = served([RS_1, FC_1, FC_2])
    case.body["store"] = False
    result = _accepted(case, [USER, _out(FC_1), _out(FC_2)])
    assert result.body["input"][1:3] == [_without_id(FC_1), _without_id(FC_2)]
    assert {finding.code for finding in result.findings} >= {"TM101", "TM405", "TM407"}
