"""Property tests of the Messages repair: valid Anthropic histories, broken the ways clients break them, repaired.

* ``valid_histories()`` generates requests the strict Messages validator accepts, with what the server minted
  (``ServerState``) and what toolmend remembered of its answers: user turns (string or block content), tool
  loops of 1-3 parallel ``tool_use`` with their results (leading, in any order, sometimes with text after),
  text answers; thinking off, manual or adaptive (every assistant answer then starts with signed thinking,
  sometimes with redacted thinking after it).
* ``BREAKERS`` break them the catalogue's ways (section 2 of the Messages rules), 1-3 at a time: a dropped call
  turn (AM-4), lost results (AM-1), an ESC cancel, text before the results (AM-2) or after the calls (AM-3), a
  repeated result (AM-5), ids from another provider (AM-7), JSON-text input (AM-8), empty text (AM-17), stray
  ``index`` (AM-18), text put before the thinking (AM-10), thinking dropped from the final tool turn (AM-9), and
  thinking switched off by the client (AM-11). Histories come from Anthropic (signed thinking) or DeepSeek's
  Anthropic endpoint (unsigned thinking, kept by toolmend's ``deepseek`` profile).
* The properties: the repair is accepted by the strict validator (signatures checked), loses no tool result's
  content, never edits the request it was given, and a repaired history needs no second repair.

Runs are deterministic (the ``ci`` hypothesis profile of tests/conftest.py) and take a few seconds.
"""

from __future__ import annotations

import copy
import string
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.dialects.messages import MESSAGES
from proxy.repair import Policy
from proxy.repair.content import as_text
from tests.support.hypothesis_budget import examples
from tests.support.pairing_check import checked_pairings
from tests.support.messages_validator import ServerState, violations

#: The server a history was made by, toolmend's profile for its route, and the validator's profile for it.
SERVERS = {"anthropic": MESSAGES.profile("anthropic"), "deepseek": MESSAGES.profile("deepseek")}
ALNUM = string.ascii_letters + string.digits
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="⟦⟧"), max_size=10)
MODES = (None, {"type": "enabled", "budget_tokens": 1024}, {"type": "adaptive"})


class History:
    """One generated request: its body, the server that answered it, and what toolmend remembered."""

    def __init__(self, draw: Callable[[Any], Any]) -> None:
        self.draw = draw
        self.count = 0
        self.state = ServerState()
        self.memory: dict[str, dict[str, Any]] = {}
        self.mode = draw(st.sampled_from(MODES))
        self.server = draw(st.sampled_from(tuple(SERVERS)))  # DeepSeek's Anthropic endpoint signs no thinking
        self.messages: list[dict[str, Any]] = []

    def tag(self) -> str:
        """A unique text: a tag that identifies it anywhere it ends up (results merged, moved)."""
        self.count += 1
        return f"{self.draw(WORDS)}⟦{self.count}⟧"

    def text(self) -> dict[str, Any]:
        return {"type": "text", "text": self.tag()}

    def answer(self, content: list[dict[str, Any]]) -> None:
        """An assistant answer the server made: thinking first when thinking is on, minted and remembered."""
        if self.mode is not None:
            thinking = [{"type": "thinking", "thinking": self.tag()}]
            if self.server == "anthropic":
                thinking[0]["signature"] = f"sig{self.count}"
            elif self.draw(st.integers(0, 3)) == 0:
                thinking.append({"type": "redacted_thinking", "data": f"redacted{self.count}"})
            content = thinking + content
        self.state.mint(content)
        ids = [block["id"] for block in content if block["type"] == "tool_use"]
        if ids:
            turn = {"dialect": "messages", "ids": ids, "message_id": f"msg_{self.count}", "blocks": copy.deepcopy(content)}
            self.memory.update(dict.fromkeys(ids, turn))
        self.messages.append({"role": "assistant", "content": content})

    def tool_loop(self) -> None:
        calls = [{"type": "tool_use", "id": "toolu_" + self.draw(st.text(ALNUM, min_size=20, max_size=20)) + str(self.count + i),
                  "name": self.draw(st.sampled_from(("read_file", "grep", "run"))), "input": {"arg": self.tag()}}
                 for i in range(self.draw(st.integers(1, 3)))]
        self.answer(([self.text()] if self.draw(st.booleans()) else []) + calls)
        results: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": call["id"], "content": self.result_content()} for call in calls]
        results = self.draw(st.permutations(results))
        if self.draw(st.integers(0, 3)) == 0:
            results.append(self.text())
        self.messages.append({"role": "user", "content": results})

    def result_content(self) -> Any:
        return self.tag() if self.draw(st.booleans()) else [self.text()]


@st.composite
def valid_histories(draw: Callable[[Any], Any]) -> History:
    history = History(draw)
    for _ in range(draw(st.integers(1, 3))):
        history.messages.append({"role": "user", "content": history.tag() if draw(st.booleans()) else [history.text()]})
        for _ in range(draw(st.integers(0, 2))):
            history.tool_loop()
        if draw(st.booleans()):
            history.answer([history.text()])
    if history.messages[-1]["role"] == "assistant":
        history.messages.append({"role": "user", "content": history.tag()})
    return history


# --------------------------------------------------------------------------------------------------
# breakers: each takes the messages and a draw, and breaks them in place (or does nothing if it cannot)
# --------------------------------------------------------------------------------------------------

Breaker = Callable[[list[dict[str, Any]], Callable[[Any], Any]], None]


def _where(messages: list[dict[str, Any]], draw: Callable[[Any], Any], test: Callable[[dict[str, Any]], bool]) -> int | None:
    positions = [n for n, message in enumerate(messages) if test(message)]
    return draw(st.sampled_from(positions)) if positions else None


def _calls(message: dict[str, Any]) -> bool:
    return message["role"] == "assistant" and type(message["content"]) is list and any(b.get("type") == "tool_use" for b in message["content"])


def _results(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and type(message["content"]) is list and any(b.get("type") == "tool_result" for b in message["content"])


def drop_turn(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """The client dropped an assistant message whose results it kept (trimming, compaction): AM-4."""
    n = _where(messages, draw, _calls)
    if n is not None:
        del messages[n]


def lose_results(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """A result never came back (crash, interrupted tool): AM-1."""
    n = _where(messages, draw, _results)
    if n is not None:
        content = messages[n]["content"]
        content.pop(draw(st.sampled_from([k for k, b in enumerate(content) if b.get("type") == "tool_result"])))
        if not content:
            del messages[n]


def cancel(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """ESC during a tool call: everything after the call turn is gone, the user types on: AM-1."""
    n = _where(messages, draw, _calls)
    if n is not None:
        del messages[n + 1 :]
        if draw(st.booleans()):
            messages.append({"role": "user", "content": "Never mind."})


def text_before_results(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """A framework put a note in front of the results: AM-2."""
    n = _where(messages, draw, _results)
    if n is not None:
        messages[n]["content"].insert(0, {"type": "text", "text": "Here you go."})


def text_after_calls(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """The closing text stored after the calls: AM-3."""
    n = _where(messages, draw, _calls)
    if n is not None:
        messages[n]["content"].append({"type": "text", "text": "I will wait for the results."})


def repeat_result(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """A replayed result: AM-5."""
    n = _where(messages, draw, _results)
    if n is not None:
        content = messages[n]["content"]
        k = draw(st.sampled_from([k for k, b in enumerate(content) if b.get("type") == "tool_result"]))
        content.insert(k + 1, copy.deepcopy(content[k]))


def foreign_ids(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """Ids minted by another provider, in the calls and the results alike: AM-7."""
    for number, (old, new) in enumerate({b["id"]: f"functions.{b['name']}:{k}" for m in messages if _calls(m)
                                         for k, b in enumerate(m["content"]) if b.get("type") == "tool_use"}.items()):
        if number and not draw(st.booleans()):
            continue
        for message in messages:
            for block in message["content"] if type(message["content"]) is list else ():
                if block.get("id") == old:
                    block["id"] = new
                if block.get("tool_use_id") == old:
                    block["tool_use_id"] = new


def text_input(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """Arguments kept as chat-completions JSON text: AM-8."""
    n = _where(messages, draw, _calls)
    if n is not None:
        block = next(b for b in messages[n]["content"] if b.get("type") == "tool_use")
        block["input"] = '{"arg": "x"}' if draw(st.booleans()) else ""


def empty_text(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """An empty text block from a tool-only turn: AM-17."""
    n = _where(messages, draw, lambda m: type(m["content"]) is list)
    if n is not None:
        content = messages[n]["content"]
        at = len(content) - 1 if messages[n]["role"] == "assistant" and _calls(messages[n]) else draw(st.integers(0, len(content)))
        content.insert(max(at, 0), {"type": "text", "text": ""})


def stream_index(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """The streaming event's index kept on a block: AM-18."""
    n = _where(messages, draw, lambda m: type(m["content"]) is list and bool(m["content"]))
    if n is not None:
        content = messages[n]["content"]
        k = draw(st.integers(0, len(content) - 1))
        content[k] = {**content[k], "index": k}


def text_before_thinking(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """A framework that writes the text before the reasoning: AM-10."""
    n = _where(messages, draw, lambda m: m["role"] == "assistant" and m["content"][0].get("type") in ("thinking", "redacted_thinking"))
    if n is not None:
        messages[n]["content"].insert(0, {"type": "text", "text": "Thinking about it."})


def thinking_dropped(messages: list[dict[str, Any]], draw: Callable[[Any], Any]) -> None:
    """A framework that keeps text and calls only: the last call turn loses its thinking (AM-9 with manual thinking)."""
    n = next((n for n in range(len(messages) - 1, -1, -1) if _calls(messages[n])), None)
    if n is not None:
        messages[n]["content"] = [b for b in messages[n]["content"] if b.get("type") not in ("thinking", "redacted_thinking")]


BREAKERS: tuple[Breaker, ...] = (drop_turn, lose_results, cancel, text_before_results, text_after_calls, repeat_result, foreign_ids,
                                 text_input, empty_text, stream_index, text_before_thinking, thinking_dropped)


def result_tags(messages: list[Any]) -> set[str]:
    """The tags of every tool result's content: what the repair must not lose."""
    tags = set()
    for message in messages:
        for block in message.get("content") if type(message.get("content")) is list else ():
            if type(block) is dict and block.get("type") == "tool_result":
                text = as_text(block.get("content"))
                tags.update(part.split("⟧")[0] for part in text.split("⟦")[1:])
    return tags


def config(default: int) -> settings:
    return settings(max_examples=examples(default), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@config(500)
@given(valid_histories(), st.lists(st.sampled_from(BREAKERS), min_size=1, max_size=3), st.data())
def test_broken_histories_are_repaired_into_ones_a_strict_server_accepts(history: History, breakers: list[Breaker], data: st.DataObject) -> None:
    body: dict[str, Any] = {"model": "claude-strict-test", "max_tokens": 2048, "messages": history.messages}
    if history.mode is not None:
        body["thinking"] = history.mode
    profile, server = SERVERS[history.server], history.server
    assert violations(body, profile=server, state=history.state) == []
    valid = MESSAGES.plan(body, profile)  # none, or a look in memory that finds nothing to change (signed thinking, AM-13)
    assert valid is None or valid.repair({key: turn for key, turn in history.memory.items() if key in valid.recall}, Policy()).findings == ()
    for breaker in breakers:
        breaker(body["messages"], data.draw)
    if history.mode is not None and data.draw(st.integers(0, 5)) == 0:
        del body["thinking"]  # the client switched thinking off mid-session
    if not body["messages"]:
        return
    sent = copy.deepcopy(body)
    planned = MESSAGES.plan(body, profile)
    if planned is None:  # the breakers undid each other, or did nothing
        assert violations(body, profile=server, state=history.state) == []
        return
    with checked_pairings():
        result = planned.repair({key: turn for key, turn in history.memory.items() if key in planned.recall}, Policy())
    assert body == sent  # the request is never edited
    assert result.rejected is None
    assert violations(result.body, profile=server, state=history.state) == [], [f.as_dict() for f in result.findings]
    assert result_tags(result.body["messages"]) >= result_tags(body["messages"])
    again = MESSAGES.plan(result.body, profile)
    assert again is None or again.repair({key: turn for key, turn in history.memory.items() if key in again.recall}, Policy()).findings == ()
