"""Clients of ``/v1/messages`` for the end-to-end tests: the official ``anthropic`` package, and what agent loops do
with its answers.

* :class:`Wire` records every exchange of an ``anthropic`` client with the proxy, through the event hooks of the
  client's own HTTP client: the request's path, query, headers and body exactly as the client sent them, and the
  headers of the answer (``x-toolmend-repairs``, ``x-toolmend-calls``), for JSON and streamed answers.
  Its clients carry their key where they are told to: ``Authorization: Bearer`` (what ``anthropic`` 2.x sends for
  ``api_key``, and Claude Code for ``ANTHROPIC_AUTH_TOKEN``) or ``x-api-key`` (the 0.x SDKs, Claude Code for
  ``ANTHROPIC_API_KEY``).
* :func:`ask` makes one ``messages`` request the three ways the client offers (``create``, ``create`` with
  ``stream=True`` read event by event as an agent does, the ``messages.stream`` helper with ``get_final_message``)
  and answers the final message either way.
* :func:`kept` is an answer as a client that keeps everything stores it, :func:`text_only` as a forgetful one does
  (its text, no ``tool_use``, no thinking), :func:`results_for` the user message a client sends back for its calls,
  :func:`text_of` what an answer says.
* :func:`arrived_as_emitted` checks that the assistant turns an upstream emitted came back to it whole and
  unchanged, by value and by their exact bytes (:func:`encoded_as_emitted`: the bytes of one turn).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

from proxy.dialects.messages.blocks import is_thinking, is_tool_use
from tests.support.client_tls import TLS
from tests.support.lazy import lazy
from tests.support.strict_upstream import Received

if TYPE_CHECKING:
    from anthropic.types import Message

anthropic = lazy("anthropic")

__all__ = ["MODES", "Carrier", "Exchange", "Mode", "Wire", "arrived_as_emitted", "ask", "assistant_contents", "encoded_as_emitted", "kept",
           "results_for", "text_of", "text_only", "tool_uses"]

Mode = Literal["create", "create-stream", "stream-helper"]
MODES: tuple[Mode, ...] = ("create", "create-stream", "stream-helper")
#: Where a client puts its key.
Carrier = Literal["authorization", "x-api-key"]


@dataclass(frozen=True)
class Exchange:
    """One request a client made: where to, its headers and body as sent, and the headers of the answer."""

    path: str
    query: str
    sent: bytes
    request_headers: dict[str, str]
    headers: dict[str, str]


@dataclass
class Wire:
    """Every exchange of the clients it made, in order."""

    exchanges: list[Exchange] = field(default_factory=list)

    @property
    def last(self) -> Exchange:
        return self.exchanges[-1]

    def posts(self, path: str = "/v1/messages") -> list[Exchange]:
        return [exchange for exchange in self.exchanges if exchange.path == path]

    def _record(self, response: Any) -> None:
        request = response.request
        self.exchanges.append(Exchange(
            request.url.path, request.url.query.decode() if isinstance(request.url.query, bytes) else str(request.url.query),
            bytes(request.content), {k.lower(): v for k, v in request.headers.items()}, {k.lower(): v for k, v in response.headers.items()},
        ))

    def client(self, base_url: str, api_key: str, carrier: Carrier = "authorization", **options: Any) -> anthropic.Anthropic:
        """An ``anthropic.Anthropic`` on ``base_url`` (the proxy's origin: the SDK adds ``/v1/messages``), without retries,
        that sends ``api_key`` in ``carrier`` only. The carrier is set here rather than left to the SDK, since SDKs differ
        (``anthropic`` 2.x sends ``api_key`` as ``Authorization: Bearer``, the 0.x releases as ``X-Api-Key``)."""
        other = "X-Api-Key" if carrier == "authorization" else "Authorization"
        headers: dict[str, Any] = {other: anthropic.Omit(), **options.pop("default_headers", {})}
        if carrier == "authorization":
            credential: dict[str, Any] = {"auth_token": api_key}  # a bearer token in every release
        else:
            credential = {"api_key": api_key}
            headers["X-Api-Key"] = api_key
        http = anthropic.DefaultHttpxClient(verify=TLS, event_hooks={"response": [self._record]})
        return anthropic.Anthropic(base_url=base_url, **credential, http_client=http, max_retries=0, default_headers=headers, **options)


def ask(client: anthropic.Anthropic, mode: Mode, **request: Any) -> Message:
    """One ``POST /v1/messages``, made the way ``mode`` names; the final message."""
    if mode == "create":
        return client.messages.create(**request)
    if mode == "stream-helper":
        with client.messages.stream(**request) as stream:
            return stream.get_final_message()
    with client.messages.create(stream=True, **request) as events:
        return _assembled(events)


def _assembled(events: Iterable[Any]) -> Message:
    """The message a raw event stream carries, put together as an agent reading ``stream=True`` does: each block from
    its ``content_block_start`` and its deltas (text, thinking, the signature, the input's JSON text)."""
    message: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    stops = 0
    for event in events:
        if event.type == "message_start":
            message = event.message.model_dump(mode="json", exclude_none=True)
        elif event.type == "content_block_start":
            blocks[event.index] = event.content_block.model_dump(mode="json", exclude_none=True)
        elif event.type == "content_block_delta":
            block, delta = blocks[event.index], event.delta
            if delta.type == "text_delta":
                block["text"] += delta.text
            elif delta.type == "thinking_delta":
                block["thinking"] += delta.thinking
            elif delta.type == "signature_delta":
                block["signature"] = delta.signature
            elif delta.type == "input_json_delta":
                inputs[event.index] = inputs.get(event.index, "") + delta.partial_json
        elif event.type == "content_block_stop" and event.index in inputs:
            blocks[event.index]["input"] = orjson.loads(inputs.pop(event.index) or "{}")
        elif event.type == "message_delta":
            assert message is not None, "message_delta before message_start"
            message.update(stop_reason=event.delta.stop_reason, stop_sequence=event.delta.stop_sequence)
        elif event.type == "message_stop":
            stops += 1
    assert message is not None and stops == 1, "the stream did not run from one message_start to one message_stop"
    message["content"] = [blocks[index] for index in sorted(blocks)]
    return anthropic.types.Message.model_validate(message)


def kept(message: Message) -> list[dict[str, Any]]:
    """An answer's content blocks as a client that keeps everything stores them (the SDK's JSON form)."""
    return [block.model_dump(mode="json", exclude_none=True) for block in message.content]


def tool_uses(message: Message) -> list[dict[str, Any]]:
    return [block for block in kept(message) if is_tool_use(block)]


def text_of(message: Message) -> str:
    """The text an answer says (its text blocks, joined)."""
    return "".join(block.text for block in message.content if block.type == "text")


def text_only(message: Message) -> dict[str, Any]:
    """The assistant message a forgetful client stores for an answer: its text blocks only (no ``tool_use``, no thinking)."""
    texts = [{"type": "text", "text": block.text} for block in message.content if block.type == "text"]
    assert texts, "the answer has no text to keep"
    return {"role": "assistant", "content": texts}


def results_for(message: Message, text: str = "ok") -> dict[str, Any]:
    """The user message answering every ``tool_use`` of ``message``, in the calls' order."""
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": f"{call['name']}: {text}"}
                                        for call in tool_uses(message)]}


def assistant_contents(received: Received) -> list[list[Any]]:
    """The content of every assistant message of a request the upstream received, in order (a string as one text block)."""
    messages = received.json["messages"]
    return [[{"type": "text", "text": m["content"]}] if isinstance(m["content"], str) else m["content"]
            for m in messages if m.get("role") == "assistant"]


def arrived_as_emitted(received: Received, emitted: Iterable[list[dict[str, Any]]]) -> None:
    """Every emitted tool turn (thinking, text, ``tool_use`` blocks) is the whole content of one assistant message of
    ``received``, in order, with every thinking block first; and each block's thinking and call, as the upstream
    encoded it (with orjson, as toolmend does), is in the received bytes: nothing was re-encoded, no signature touched."""
    contents = [content for content in assistant_contents(received) if any(is_tool_use(block) for block in content)]
    emitted = list(emitted)
    assert contents == emitted, "the tool turns the upstream received are not the ones it emitted"
    for content in emitted:
        thinking = [n for n, block in enumerate(content) if is_thinking(block)]
        assert thinking == list(range(len(thinking))), "thinking blocks must open the message"
        encoded_as_emitted(received, content)


def encoded_as_emitted(received: Received, content: list[dict[str, Any]]) -> None:
    """Each thinking and ``tool_use`` block of an emitted turn is in ``received``'s bytes as the upstream encoded it."""
    for block in content:
        if is_thinking(block) or is_tool_use(block):
            assert orjson.dumps(block) in received.body_bytes, f"{block['type']} block was re-encoded or changed"
