"""Property tests of the repair engine: valid histories, broken the way real frameworks break them, repaired.

* ``valid_bodies()`` generates histories a strict provider accepts (strict validator, ``skip=("S12",)``):
  system/user/assistant text turns, agent loops of 1-4 parallel calls with OpenAI-like ids, results in any
  order, ``content: null`` / missing / text beside ``tool_calls``, optional ``tools``.
* ``BREAKERS`` break them (section 2 of docs/provider-rules.md), 1-3 at a time, in any order.
* The properties: the repair is accepted by the strict validator, idempotent, never mutates its input (nor
  the memory), keeps every user/system message and every text, restores dropped calls exactly from memory,
  returns a valid history as the very same object, and reports only known rule codes.

Engine bugs the properties found are pinned at the end of the file as regression tests (BUG-1 .. BUG-5),
each with its minimal reproducer as an ``@example`` and a strategy for its whole family; the main property
carries the reproducers too.

Runs are deterministic (tests/conftest.py: the ``ci`` hypothesis profile, derandomized, no example
database), and the budgets keep the file well under 40 s on 2 cores. The long random campaign is opt-in:
``TOOLMEND_HYPOTHESIS=campaign python -m pytest -p no:cacheprovider tests/unit/dialects/chat/test_properties.py``
(``TOOLMEND_HYPOTHESIS_EXAMPLES=N`` examples per property, default 5,000).
"""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proxy.dialects.chat.plan import plan, repair
from proxy.registry import rule_docs
from proxy.repair import DEFAULT_PLACEHOLDER, Policy, Result
from proxy.turns import make_turn
from tests.support.hypothesis_budget import examples
from tests.support.pairing_check import checked_pairings
from tests.support.strict_validator import violations

SKIP = ("S12", "S9")  # OpenAI accepts a history that opens with a call turn (GE-3 is a profile's business) and tool text parts (GR-2, MI-9 are)
POLICIES = ("synthesize", "drop", "reject")
KNOWN_CODES = {doc.code for doc in rule_docs("chat")}
MEDIA_LABEL = "[toolmend] Media returned by tool call"


def config(default: int) -> settings:
    return settings(
        max_examples=examples(default),
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


# --------------------------------------------------------------------------------------------------
# valid histories
# --------------------------------------------------------------------------------------------------

TOOL_NAMES = ("get_weather", "search_web", "read_file", "run_shell")
ALNUM = string.ascii_letters + string.digits
# Texts never contain the brackets of the unique tag every generated text ends with, so a tag identifies
# its text even inside a merged result ("a\n\nb") or a JSON-converted one.
CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="⟦⟧")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(CHARS, max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(CHARS, max_size=5), inner, max_size=3),
    max_leaves=6,
)


class Gen:
    """Per-example helper: unique texts and unique call ids."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.count = 0
        self.ids: set[str] = set()

    def text(self, empty_ok: bool = False) -> str:
        if empty_ok and self.draw(st.integers(0, 9)) == 0:
            return ""
        self.count += 1
        body = self.draw(st.text(CHARS, max_size=12))
        return f"{body}⟦{self.count}⟧"

    def call_id(self) -> str:
        cid = "call_" + self.draw(st.text(ALNUM, min_size=24, max_size=24))
        while cid in self.ids:  # rare: keep the shape, make it unique
            cid = cid[:-4] + f"{len(self.ids) % 10000:04d}"
            if cid in self.ids:
                cid = "call_" + format(len(self.ids), "024d")
        self.ids.add(cid)
        return cid

    def arguments(self) -> str:
        value = self.draw(st.dictionaries(st.text(ALNUM + "_ ", max_size=8), JSON_VALUES, max_size=3))
        style = self.draw(st.integers(0, 4))
        if style == 0:
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        elif style == 1:
            text = json.dumps(value)
        elif style == 2:
            text = json.dumps(value, indent=2, ensure_ascii=False)
        elif style == 3:
            text = orjson.dumps(value).decode()
        else:
            text = " " + json.dumps(value, separators=(" ,", " : ")) + "\n"
        return text


def _call_round(gen: Gen, names: tuple[str, ...]) -> list[dict]:
    draw = gen.draw
    calls = [
        {
            "id": gen.call_id(),
            "type": "function",
            "function": {"name": draw(st.sampled_from(names)), "arguments": gen.arguments()},
        }
        for _ in range(draw(st.integers(1, 4)))
    ]
    turn: dict[str, Any] = {"role": "assistant"}
    mode = draw(st.sampled_from(("null", "null", "missing", "text", "empty")))
    if mode == "null":
        turn["content"] = None
    elif mode == "text":
        turn["content"] = gen.text()
    elif mode == "empty":
        turn["content"] = ""
    turn["tool_calls"] = calls
    results = []
    for call in calls:
        result = {"role": "tool", "tool_call_id": call["id"], "content": gen.text(empty_ok=True)}
        if draw(st.integers(0, 3)) == 0:
            result["name"] = call["function"]["name"]
        results.append(result)
    if len(results) > 1 and draw(st.booleans()):
        results = draw(st.permutations(results))
    return [turn, *results]


@st.composite
def valid_bodies(draw: Callable[[Any], Any]) -> dict:
    gen = Gen(draw)
    tools_mode = draw(st.sampled_from(("none", "all", "one")))
    names = TOOL_NAMES if tools_mode != "one" else (draw(st.sampled_from(TOOL_NAMES)),)
    messages: list[dict] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": gen.text()})
    episodes = draw(st.integers(1, 3))
    for episode in range(episodes):
        if episode and draw(st.integers(0, 4)) == 0:
            messages.append({"role": "system", "content": gen.text()})
        if draw(st.integers(0, 5)) == 0:
            messages.append({"role": "user", "content": [{"type": "text", "text": gen.text()}]})
        else:
            messages.append({"role": "user", "content": gen.text()})
        rounds = draw(st.integers(0, 3))
        for _ in range(rounds):
            if draw(st.integers(0, 5)) == 0:
                messages.append({"role": "assistant", "content": gen.text()})  # "Let me check." before the call
            messages += _call_round(gen, names)
        last = episode == episodes - 1
        if draw(st.integers(0, 4)) > (1 if last else 0):
            messages.append({"role": "assistant", "content": gen.text()})
    body: dict[str, Any] = {"model": "strict-model", "messages": messages}
    if tools_mode != "none":
        body["tools"] = [
            {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}} for name in names
        ]
    return body


# --------------------------------------------------------------------------------------------------
# breakers
# --------------------------------------------------------------------------------------------------


@dataclass
class Case:
    original: dict
    broken: dict = field(default_factory=dict)
    memory: dict[str, dict] = field(default_factory=dict)
    breakers: list[str] = field(default_factory=list)
    dropped_calls: list[dict] = field(default_factory=list)
    gen: Gen | None = field(default=None, repr=False)

    def recall(self, ids: list[str]) -> dict[str, dict]:
        return {cid: self.memory[cid] for cid in ids if cid in self.memory}


def repair_as_served(body: dict, case: Case, policy: Policy = Policy()) -> Result:
    """What the server does: plan, recall only the ids the plan names, then repair with those turns."""
    planned = plan(body)
    return Result(body, ()) if planned is None else planned.repair(case.recall(planned.recall), policy)


def _is_call_turn(message: Any) -> bool:
    return (
        type(message) is dict
        and message.get("role") == "assistant"
        and type(message.get("tool_calls")) is list
        and bool(message["tool_calls"])
        and all(type(call) is dict for call in message["tool_calls"])
    )


def _call_turns(messages: list) -> list[int]:
    return [i for i, m in enumerate(messages) if _is_call_turn(m)]


def _tool_indexes(messages: list) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "tool"]


def _block_end(messages: list, turn: int) -> int:
    end = turn + 1
    while end < len(messages) and messages[end].get("role") == "tool":
        end += 1
    return end


def _owner(messages: list, call_id: Any) -> int | None:
    for i in _call_turns(messages):
        if any(call.get("id") == call_id for call in messages[i]["tool_calls"]):
            return i
    return None


def _all_calls(messages: list) -> list[dict]:
    return [call for i in _call_turns(messages) for call in messages[i]["tool_calls"]]


def truncate_front(messages: list, draw: Any, case: Case) -> list:
    """Window trimming: keep the last messages, cutting anywhere (inside a block too)."""
    if len(messages) < 2:
        return messages
    return messages[draw(st.integers(1, len(messages) - 1)) :]


def drop_tool_calls(messages: list, draw: Any, case: Case) -> list:
    """A framework keeps only the text of some call turns (or saves ``tool_calls: []``)."""
    turns = _call_turns(messages)
    if not turns:
        return messages
    chosen = draw(st.lists(st.sampled_from(turns), min_size=1, max_size=len(turns), unique=True))
    for i in sorted(chosen, reverse=True):
        message = messages[i]
        case.dropped_calls += copy.deepcopy(message["tool_calls"])
        if len(messages) == 1 or draw(st.booleans()):
            message["tool_calls"] = []
        else:
            del message["tool_calls"]
            if not (type(message.get("content")) is str and message["content"]):
                del messages[i]
    return messages


def drop_results(messages: list, draw: Any, case: Case) -> list:
    """Interrupted tools: some results never made it into the history."""
    tools = _tool_indexes(messages)
    if not tools:
        return messages
    chosen = draw(st.lists(st.sampled_from(tools), min_size=1, max_size=3, unique=True))
    if len(chosen) == len(messages):
        chosen.pop()  # a history is never empty
    for i in sorted(chosen, reverse=True):
        del messages[i]
    return messages


def interleave(messages: list, draw: Any, case: Case) -> list:
    """A framework injects a user/system note between a call turn and (some of) its results."""
    turns = _call_turns(messages)
    if not turns:
        return messages
    turn = draw(st.sampled_from(turns))
    end = _block_end(messages, turn)
    position = draw(st.integers(turn + 1, max(turn + 1, end - 1)))
    assert case.gen is not None
    messages.insert(position, {"role": draw(st.sampled_from(("user", "system"))), "content": case.gen.text()})
    return messages


def split_parallel(messages: list, draw: Any, case: Case) -> list:
    """Parallel calls stored as consecutive assistant messages, results after."""
    candidates = [i for i in _call_turns(messages) if len(messages[i]["tool_calls"]) >= 2]
    if not candidates:
        return messages
    turn = draw(st.sampled_from(candidates))
    calls = messages[turn]["tool_calls"]
    cuts = sorted(draw(st.sets(st.integers(1, len(calls) - 1), min_size=1)))
    parts = [calls[a:b] for a, b in zip([0, *cuts], [*cuts, len(calls)])]
    messages[turn]["tool_calls"] = parts[0]
    for offset, part in enumerate(parts[1:], 1):
        messages.insert(turn + offset, {"role": "assistant", "content": None, "tool_calls": part})
    return messages


def duplicate_result(messages: list, draw: Any, case: Case) -> list:
    """A replayed block (the same result twice) or a framework placeholder next to the real result."""
    tools = _tool_indexes(messages)
    if not tools:
        return messages
    i = draw(st.sampled_from(tools))
    if draw(st.booleans()):
        where = draw(st.sampled_from((i + 1, _block_end(messages, i))))
        messages.insert(where, copy.deepcopy(messages[i]))
    else:
        placeholder = copy.deepcopy(messages[i])
        placeholder["content"] = draw(st.sampled_from((DEFAULT_PLACEHOLDER, "", None)))
        messages.insert(i, placeholder)
    return messages


def reuse_call_id(messages: list, draw: Any, case: Case) -> list:
    """A model reuses an earlier call id in a later turn (and its result carries it)."""
    turns = _call_turns(messages)
    if len(turns) < 2:
        return messages
    first, later = sorted(draw(st.lists(st.sampled_from(turns), min_size=2, max_size=2, unique=True)))
    reused = draw(st.sampled_from(messages[first]["tool_calls"])).get("id")
    call = draw(st.sampled_from(messages[later]["tool_calls"]))
    old = call.get("id")
    if type(reused) is not str or old == reused:
        return messages
    call["id"] = reused
    for message in messages[later + 1 :]:
        if message.get("role") == "tool" and message.get("tool_call_id") == old:
            message["tool_call_id"] = reused
    return messages


def move_result(messages: list, draw: Any, case: Case) -> list:
    """Persistence races: a result stored before its call, or after the next turn."""
    movable = [i for i in _tool_indexes(messages) if _owner(messages, messages[i].get("tool_call_id")) is not None]
    if not movable:
        return messages
    i = draw(st.sampled_from(movable))
    result = messages.pop(i)
    owner = _owner(messages, result.get("tool_call_id"))
    assert owner is not None
    if draw(st.booleans()):
        messages.insert(owner, result)
        return messages
    end = _block_end(messages, owner)
    later = [j for j in range(end, len(messages)) if messages[j].get("role") == "assistant"]
    messages.insert(later[0] + 1 if later else len(messages), result)
    return messages


def retype(messages: list, draw: Any, case: Case) -> list:
    """Cross-provider replay and model defects: arguments as a dict, ``""`` or cut-off JSON; tool content
    as an object, a list of text parts or null."""
    kinds = ("args_dict", "args_empty", "args_truncated", "content_dict", "content_parts", "content_null")
    kind = draw(st.sampled_from(kinds))
    if kind.startswith("args"):
        calls = [
            c
            for c in _all_calls(messages)
            if type(c.get("function")) is dict and type(c["function"].get("arguments")) is str
        ]
        if not calls:
            return messages
        function = draw(st.sampled_from(calls))["function"]
        text = function["arguments"]
        if kind == "args_dict":
            try:
                function["arguments"] = json.loads(text)
            except ValueError:  # an earlier breaker already broke this text
                pass
        elif kind == "args_empty":
            function["arguments"] = ""
        elif len(text.strip()) > 1:
            function["arguments"] = text[: draw(st.integers(1, len(text) - 1))]
        return messages
    tools = [i for i in _tool_indexes(messages) if type(messages[i].get("content")) is str]
    if not tools:
        return messages
    message = messages[draw(st.sampled_from(tools))]
    text = message["content"]
    if kind == "content_dict":
        message["content"] = draw(st.sampled_from(({"result": text}, {"ok": True, "output": text, "n": [1, 2]})))
    elif kind == "content_parts":
        cut = draw(st.integers(0, len(text)))
        pieces = [text[:cut], text[cut:]] if draw(st.booleans()) else [text]
        message["content"] = [{"type": "text", "text": piece} for piece in pieces]
    else:
        message["content"] = None
    return messages


def remove_type(messages: list, draw: Any, case: Case) -> list:
    """A client that omits ``"type": "function"`` on a call."""
    calls = _all_calls(messages)
    if calls:
        call = draw(st.sampled_from(calls))
        if draw(st.booleans()):
            call.pop("type", None)
        else:
            call["type"] = None
    return messages


def remove_result_id(messages: list, draw: Any, case: Case) -> list:
    """A tool result without ``tool_call_id`` (it keeps its ``name``)."""
    tools = [i for i in _tool_indexes(messages) if "tool_call_id" in messages[i]]
    if not tools:
        return messages
    message = messages[draw(st.sampled_from(tools))]
    owner = _owner(messages, message["tool_call_id"])
    if owner is not None and "name" not in message:
        for call in messages[owner]["tool_calls"]:
            if call.get("id") == message["tool_call_id"] and type(call.get("function")) is dict:
                message["name"] = call["function"].get("name")
    del message["tool_call_id"]
    return messages


def legacy_function_call(messages: list, draw: Any, case: Case) -> list:
    """Legacy function calling: ``function_call`` on the assistant, ``role: "function"`` results."""
    candidates = [
        i
        for i in _call_turns(messages)
        if len(messages[i]["tool_calls"]) == 1 and type(messages[i]["tool_calls"][0].get("function")) is dict
    ]
    if not candidates:
        return messages
    message = messages[draw(st.sampled_from(candidates))]
    call = message.pop("tool_calls")[0]
    message["function_call"] = copy.deepcopy(call["function"])
    for result in messages:
        if result.get("role") == "tool" and result.get("tool_call_id") == call.get("id"):
            result["role"] = "function"
            result["name"] = call["function"].get("name")
            del result["tool_call_id"]
    return messages


def long_call_id(messages: list, draw: Any, case: Case) -> list:
    """Ids from another provider or framework, longer than OpenAI's 40 characters."""
    calls = [c for c in _all_calls(messages) if type(c.get("id")) is str]
    if not calls:
        return messages
    call = draw(st.sampled_from(calls))
    old = call["id"]
    new = "toolu_" + draw(st.text(ALNUM + "-_", min_size=35, max_size=60))
    call["id"] = new
    for message in messages:
        if message.get("role") == "tool" and message.get("tool_call_id") == old:
            message["tool_call_id"] = new
    return messages


def image_parts(messages: list, draw: Any, case: Case) -> list:
    """A screenshot tool returning image parts in its tool message."""
    tools = [i for i in _tool_indexes(messages) if type(messages[i].get("content")) is str]
    if not tools:
        return messages
    message = messages[draw(st.sampled_from(tools))]
    assert case.gen is not None
    case.gen.count += 1
    data = draw(st.text(ALNUM + "+/", min_size=4, max_size=16)) + f"{case.gen.count}="
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}}
    text = {"type": "text", "text": message["content"]}
    message["content"] = draw(st.sampled_from(([text, image], [image], [image, text])))
    return messages


BREAKERS = {
    breaker.__name__: breaker
    for breaker in (
        truncate_front,
        drop_tool_calls,
        drop_results,
        interleave,
        split_parallel,
        duplicate_result,
        reuse_call_id,
        move_result,
        retype,
        remove_type,
        remove_result_id,
        legacy_function_call,
        long_call_id,
        image_parts,
    )
}


def _memory_of(body: dict, draw: Any, mode: str) -> dict[str, dict]:
    """What the proxy remembered: every call turn of the original history, some of them, or none."""
    turns = [m for m in body["messages"] if _is_call_turn(m)]
    if mode == "none" or not turns:
        return {}
    if mode == "some":
        turns = [t for t in turns if draw(st.booleans())]
    memory = {}
    for message in turns:
        turn = make_turn(copy.deepcopy(message["tool_calls"]), message.get("content"))
        for call in message["tool_calls"]:
            memory[call["id"]] = turn
    return memory


@st.composite
def broken_cases(
    draw: Callable[[Any], Any], breakers: tuple[str, ...] = tuple(BREAKERS), full_memory: bool = False
) -> Case:
    original = draw(valid_bodies())
    case = Case(original=original, gen=Gen(draw))
    case.gen.count = 10_000  # texts added by breakers get tags of their own
    broken = copy.deepcopy(original)
    messages = broken["messages"]
    # modulo, not sampled_from: hypothesis favours index 0, and every breaker deserves its share
    picks = draw(st.lists(st.integers(0, 2**16 - 1), min_size=1, max_size=3))
    for name in [breakers[pick % len(breakers)] for pick in picks]:
        messages = BREAKERS[name](messages, draw, case)
        case.breakers.append(name)
        assert messages, "a breaker emptied the history"
    broken["messages"] = messages
    case.broken = broken
    mode = "full" if full_memory else draw(st.sampled_from(("full", "some", "none")))
    case.memory = _memory_of(original, draw, mode)
    return case


# --------------------------------------------------------------------------------------------------
# what must survive
# --------------------------------------------------------------------------------------------------


def _text_of_tool_content(content: Any) -> str:
    """Tool content as the text it must survive as (media parts travel separately)."""
    if type(content) is str:
        return content
    if content is None:
        return ""
    if type(content) is list:
        return "\n".join(p["text"] for p in content if type(p) is dict and p.get("type") == "text")
    return orjson.dumps(content).decode()


def _media_of(content: Any) -> list:
    return [p for p in content if type(p) is dict and p.get("type") == "image_url"] if type(content) is list else []


def _is_engine_media_message(message: dict) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and type(content) is list
        and bool(content)
        and type(content[0]) is dict
        and str(content[0].get("text", "")).startswith(MEDIA_LABEL)
    )


def _droppable(message: dict, declared: set[str], memory: dict) -> bool:
    """Under policy ``drop``: may this result go (its call is declared nowhere and not remembered)?"""
    if message.get("role") != "tool":
        return True  # a legacy function result: its id is made up by the engine
    rid = message.get("tool_call_id")
    return type(rid) is not str or (rid not in declared and rid not in memory)


def _people(messages: list) -> list[dict]:
    """The user/system messages of a history, without the user messages the engine adds for media."""
    return [m for m in messages if m.get("role") in ("user", "system") and not _is_engine_media_message(m)]


def _anchors(messages: list) -> list[tuple[str, Any]]:
    out = []
    for m in messages:
        if m.get("role") in ("user", "system", "developer") and not _is_engine_media_message(m):
            out.append(("person", m))
        elif m.get("role") == "assistant" and type(m.get("content")) is str and m["content"]:
            out.append(("assistant", m["content"]))
    return out


def _is_subsequence(wanted: list[tuple[str, Any]], have: list[tuple[str, Any]]) -> bool:
    """``wanted`` appears in ``have`` in order; an assistant text may sit inside a merged one."""
    j = 0
    for kind, value in wanted:
        while j < len(have):
            hkind, hvalue = have[j]
            if kind == hkind == "person" and value == hvalue:
                j += 1
                break
            if kind == hkind == "assistant" and value in hvalue:
                break  # stay: the next text may be merged into this one too
            j += 1
        else:
            return False
    return True


def check_survivors(case: Case, policy: str, out: list[dict]) -> None:
    broken = case.broken["messages"]
    # user and system messages: all kept, unchanged, in order, never crossing an assistant text
    assert _people(out) == _people(broken)
    assert _is_subsequence(_anchors(broken), _anchors(out))

    assistant_texts = [m["content"] for m in out if m.get("role") == "assistant" and type(m.get("content")) is str]
    for m in broken:
        if m.get("role") == "assistant" and type(m.get("content")) is str and m["content"]:
            assert any(m["content"] in text for text in assistant_texts), f"assistant text lost: {m['content']!r}"

    tool_texts = [_text_of_tool_content(m.get("content")) for m in out if m.get("role") == "tool"]  # text parts stay where taken
    media_out = [p for m in out if m.get("role") == "user" for p in _media_of(m.get("content"))]
    declared = {call.get("id") for call in _all_calls(broken)}
    for m in broken:
        if m.get("role") not in ("tool", "function"):
            continue
        if policy == "drop" and _droppable(m, declared, case.memory):
            continue
        text = _text_of_tool_content(m.get("content"))
        if text and text != DEFAULT_PLACEHOLDER:
            assert any(text in t for t in tool_texts), f"tool result lost: {text!r}"
        for part in _media_of(m.get("content")):
            assert part in media_out, f"tool media lost: {part!r}"


# --------------------------------------------------------------------------------------------------
# the properties
# --------------------------------------------------------------------------------------------------


def check_repair(case: Case, policy_name: str) -> None:
    body = case.broken
    before = orjson.dumps(body)
    memory_before = orjson.dumps(case.memory)
    policy = Policy(orphans=policy_name)

    with checked_pairings():
        result = repair_as_served(body, case, policy)

    assert orjson.dumps(body) == before, "the input was mutated"
    assert orjson.dumps(case.memory) == memory_before, "the memory was mutated"
    assert {f.code for f in result.findings} <= KNOWN_CODES
    if result.rejected is not None:
        assert result.rejected in result.findings and result.body is body and not result.changed
        if result.rejected.code == "TM101":
            assert policy_name == "reject", result.rejected
        else:  # a repair that would leave no message is refused, never forwarded (BUG-1)
            assert result.rejected.code == "TM210", result.rejected
            assert not _anchors(body["messages"]), "a message with something to say was removed"
            results = [m for m in body["messages"] if m.get("role") in ("tool", "function")]
            declared = {call.get("id") for call in _all_calls(body["messages"])}
            assert policy_name == "drop" or not results
            assert all(_droppable(m, declared, case.memory) for m in results)
        return
    assert result.changed == bool(result.findings)
    if not result.findings:
        assert result.body is body
    problems = violations(result.body, skip=SKIP)
    assert not problems, [(v.rule, v.index, v.message) for v in problems[:3]]

    again = repair_as_served(result.body, case, policy)
    assert again.findings == () and again.body is result.body, [f.as_dict() for f in again.findings]
    check_survivors(case, policy_name, result.body["messages"])


@config(60)
@given(body=valid_bodies())
def test_generated_histories_are_valid(body: dict) -> None:
    assert violations(body, skip=SKIP) == []


@config(80)
@given(body=valid_bodies(), policy=st.sampled_from(POLICIES))
def test_valid_history_comes_back_as_the_same_object(body: dict, policy: str) -> None:
    before = orjson.dumps(body)
    result = repair(body, {}, policy=Policy(orphans=policy))
    assert result.body is body
    assert result.findings == () and result.rejected is None and not result.changed
    assert orjson.dumps(body) == before


def _weather(cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}


# Issue 15, found by seeded runs of the property below (BUG-1, BUG-5 at the end of the file).
EMPTIED_BY_DROP = Case(
    original={},
    broken={
        "model": "strict-model",
        "messages": [
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "tool", "tool_call_id": "call_0", "content": "x"},
        ],
    },
)
_SPLIT_CALLS = [_weather(f"call_{n}") for n in range(4)]
SPLIT_TURN_RESTORED = Case(
    original={},
    broken={
        "model": "strict-model",
        "messages": [
            {"role": "user", "content": "Weather in four cities?"},
            {"role": "assistant", "content": None, "tool_calls": _SPLIT_CALLS[:1]},
            {"role": "assistant", "content": None, "tool_calls": []},
            {"role": "assistant", "content": None, "tool_calls": _SPLIT_CALLS[2:]},
            *[{"role": "tool", "tool_call_id": call["id"], "content": f"{n}C"} for n, call in enumerate(_SPLIT_CALLS)],
        ],
    },
    memory={call["id"]: make_turn(copy.deepcopy(_SPLIT_CALLS), None) for call in _SPLIT_CALLS},
)


@config(500)
@given(case=broken_cases())
@example(case=EMPTIED_BY_DROP)
@example(case=SPLIT_TURN_RESTORED)
def test_repaired_history_is_accepted_idempotent_and_loses_nothing(case: Case) -> None:
    for policy in POLICIES:
        check_repair(case, policy)


@config(120)
@given(case=broken_cases(breakers=("drop_tool_calls",), full_memory=True))
def test_dropped_calls_are_restored_exactly_from_memory(case: Case) -> None:
    for policy in POLICIES:
        result = repair_as_served(case.broken, case, Policy(orphans=policy))
        assert result.rejected is None
        out = result.body["messages"]
        calls = [call for m in out if m.get("role") == "assistant" for call in m.get("tool_calls") or ()]
        for dropped in case.dropped_calls:
            assert calls.count(dropped) == 1, dropped
            (restored,) = [call for call in calls if call["id"] == dropped["id"]]
            assert restored["function"]["arguments"] == dropped["function"]["arguments"]
        assert violations(result.body, skip=SKIP) == []


# --------------------------------------------------------------------------------------------------
# engine bugs found by the properties above (fixed), each pinned by its minimal reproducer (``@example``)
# and a strategy for its whole family
# --------------------------------------------------------------------------------------------------


def _body(messages: list[dict]) -> dict:
    return {"model": "strict-model", "messages": messages}


def _call(gen: Gen) -> dict:
    name = gen.draw(st.sampled_from(TOOL_NAMES))
    return {"id": gen.call_id(), "type": "function", "function": {"name": name, "arguments": gen.arguments()}}


def _results(gen: Gen, calls: list[dict]) -> list[dict]:
    return [{"role": "tool", "tool_call_id": call["id"], "content": gen.text()} for call in calls]


EMPTY_ASSISTANTS = (
    {"role": "assistant", "content": None},
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": []},
    {"role": "assistant", "content": None, "tool_calls": []},
    {"role": "assistant", "content": "", "tool_calls": []},
)


@st.composite
def removable_only_bodies(draw: Callable[[Any], Any]) -> dict:
    """Nothing but what a repair may remove: the window kept only the last tool block of an agent loop
    (nothing remembered) and the empty assistant messages a framework left around it."""
    gen = Gen(draw)
    messages = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            messages.append({"role": "tool", "tool_call_id": gen.call_id(), "content": gen.text()})
        else:
            messages.append(dict(draw(st.sampled_from(EMPTY_ASSISTANTS))))
    return _body(messages)


@config(40)
@given(body=removable_only_bodies(), policy=st.sampled_from(POLICIES))
@example(body=_body([{"role": "tool", "tool_call_id": "call_1", "content": "18C"}]), policy="drop")
@example(body=copy.deepcopy(EMPTIED_BY_DROP.broken), policy="drop")  # issue 15: TM204, TM101, then TM109
@example(body=_body([{"role": "assistant", "content": None}]), policy="synthesize")
def test_bug1_a_repair_never_forwards_an_empty_history(body: dict, policy: str) -> None:
    result = repair(body, {}, policy=Policy(orphans=policy))
    has_results = any(m["role"] == "tool" for m in body["messages"])
    if policy == "synthesize" and has_results:
        assert result.rejected is None and violations(result.body, skip=SKIP) == []
    else:
        assert result.rejected is not None and not result.changed
        assert result.rejected.code == ("TM101" if policy == "reject" and has_results else "TM210")


@st.composite
def repeated_orphan_bodies(draw: Callable[[Any], Any]) -> dict:
    """A call turn the framework dropped (nothing remembered) whose result is in the history twice: a
    replayed block, or a retried tool, possibly with a note in between."""
    gen = Gen(draw)
    calls = [_call(gen) for _ in range(draw(st.integers(1, 3)))]
    results = _results(gen, calls)
    again = dict(draw(st.sampled_from(results)))
    if draw(st.booleans()):
        again["content"] = gen.text()  # the retry's own answer
    tail = [again] if draw(st.booleans()) else [{"role": "user", "content": gen.text()}, again]
    return _body([{"role": "user", "content": gen.text()}, *results, *tail])


@config(20)
@given(body=repeated_orphan_bodies())
@example(
    body=_body(
        [
            {"role": "user", "content": "Weather?"},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_1", "content": "19C"},
        ]
    )
)
def test_bug2_synthesized_calls_are_declared_once(body: dict) -> None:
    result = repair(body, {}, policy=Policy(orphans="synthesize"))
    assert violations(result.body, skip=SKIP) == []


@st.composite
def partial_holder_cases(draw: Callable[[Any], Any]) -> Case:
    """Turn A is cut by the window (some of its results stay); a later turn B reused one of A's ids (as
    Kimi's ``functions.name:0`` ids do) and has calls of its own. The proxy remembers A."""
    gen = Gen(draw)
    a_calls = [_call(gen) for _ in range(draw(st.integers(2, 4)))]
    b_calls = [_call(gen) for _ in range(draw(st.integers(2, 4)))]
    b_calls[draw(st.integers(0, len(b_calls) - 1))]["id"] = draw(st.sampled_from(a_calls))["id"]
    a_turn = {"role": "assistant", "content": None, "tool_calls": a_calls}
    a_results = _results(gen, a_calls)
    history = [
        {"role": "user", "content": gen.text()},
        a_turn,
        *a_results,
        {"role": "assistant", "content": gen.text()},
        {"role": "user", "content": gen.text()},
        {"role": "assistant", "content": None, "tool_calls": b_calls},
        *_results(gen, b_calls),
    ]
    cut = draw(st.integers(2, 1 + len(a_results) - 1))  # inside A's block: at least one result stays
    case = Case(original=_body(history), broken=_body(copy.deepcopy(history[cut:])))
    turn = make_turn(copy.deepcopy(a_calls), None)
    case.memory = {call["id"]: turn for call in a_calls}
    return case


_PARTIAL_A = make_turn(
    [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b"}'}},
    ]
)


@config(20)
@given(case=partial_holder_cases())
@example(
    case=Case(
        original={},
        broken=_body(
            [
                {"role": "tool", "tool_call_id": "call_2", "content": "b text"},
                {"role": "user", "content": "Now run the tests."},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "run_shell", "arguments": "{}"}},
                        {"id": "call_3", "type": "function", "function": {"name": "run_shell", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "built"},
                {"role": "tool", "tool_call_id": "call_3", "content": "3 passed"},
            ]
        ),
        memory={"call_1": _PARTIAL_A, "call_2": _PARTIAL_A},
    )
)
def test_bug3_restoring_a_turn_keeps_the_holders_own_calls(case: Case) -> None:
    result = repair_as_served(case.broken, case)
    out_ids = {call["id"] for m in result.body["messages"] for call in m.get("tool_calls") or ()}
    assert {call["id"] for call in _all_calls(case.broken["messages"])} <= out_ids
    assert violations(result.body, skip=SKIP) == []


@st.composite
def duplicate_media_result_bodies(draw: Callable[[Any], Any]) -> dict:
    """A screenshot tool retried: two results for one call, one of them with an image part."""
    gen = Gen(draw)
    calls = [_call(gen) for _ in range(draw(st.integers(1, 3)))]
    results = _results(gen, calls)
    index = draw(st.integers(0, len(results) - 1))
    url = "data:image/png;base64," + draw(st.text(ALNUM, min_size=4, max_size=12))
    image = {"type": "image_url", "image_url": {"url": url}}
    content = draw(st.sampled_from(([image], [{"type": "text", "text": gen.text()}, image])))
    with_media = dict(results[index], content=content)
    pair = [with_media, results[index]] if draw(st.booleans()) else [results[index], with_media]
    results[index : index + 1] = pair
    turn = {"role": "assistant", "content": None, "tool_calls": calls}
    return _body([{"role": "user", "content": gen.text()}, turn, *results])


@config(20)
@given(body=duplicate_media_result_bodies())
@example(
    body=_body(
        [
            {"role": "user", "content": "Take a screenshot"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}],
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "retried: ok"},
        ]
    )
)
def test_bug4_merged_duplicate_results_keep_their_media(body: dict) -> None:
    result = repair(body, {})
    images = [p for m in body["messages"] if m["role"] == "tool" for p in _media_of(m["content"])]
    media_out = [p for m in result.body["messages"] if m["role"] == "user" for p in _media_of(m["content"])]
    assert all(image in media_out for image in images)
    assert not any("image_url" in m["content"] for m in result.body["messages"] if m["role"] == "tool")


@st.composite
def split_turn_cases(draw: Callable[[Any], Any]) -> Case:
    """A parallel turn the client stored in parts with messages between them (``tool_calls: []``, an empty
    or a text assistant message), some parts lost, so their results are orphans; the proxy remembers the
    turn."""
    gen = Gen(draw)
    calls = [_call(gen) for _ in range(draw(st.integers(3, 6)))]
    cuts = sorted(draw(st.sets(st.integers(1, len(calls) - 1), min_size=2)))
    parts = [calls[a:b] for a, b in zip([0, *cuts], [*cuts, len(calls)])]
    lost = draw(st.sets(st.integers(0, len(parts) - 1), min_size=1, max_size=len(parts) - 1))
    user = {"role": "user", "content": gen.text()}
    stored: list[dict] = []
    for number, part in enumerate(parts):
        if number in lost:
            continue
        if stored and draw(st.booleans()):  # what sits between two parts: an empty or a text assistant message
            kind = draw(st.integers(0, len(EMPTY_ASSISTANTS)))
            stored.append(dict(EMPTY_ASSISTANTS[kind]) if kind < len(EMPTY_ASSISTANTS) else {"role": "assistant", "content": gen.text()})
        stored.append({"role": "assistant", "content": None, "tool_calls": part})
    results = _results(gen, calls)
    if draw(st.booleans()):
        results = draw(st.permutations(results))
    turn = make_turn(copy.deepcopy(calls), None)
    return Case(
        original=_body([user, {"role": "assistant", "content": None, "tool_calls": calls}, *results]),
        broken=_body([user, *stored, *results]),
        memory={call["id"]: turn for call in calls},
    )


@config(40)
@given(case=split_turn_cases())
@example(case=SPLIT_TURN_RESTORED)
def test_bug5_a_split_turn_restored_from_memory_declares_each_call_once(case: Case) -> None:
    turn_ids = sorted(case.memory)
    for policy in POLICIES:
        check_repair(case, policy)  # accepted (no id declared twice: S4), idempotent, nothing lost
        declared = [call["id"] for call in _all_calls(repair_as_served(case.broken, case, Policy(orphans=policy)).body["messages"])]
        assert sorted(declared) == turn_ids, policy
