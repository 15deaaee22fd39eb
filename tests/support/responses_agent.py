"""Clients of ``/v1/responses`` for the end-to-end tests: the ``openai`` package, and the OpenAI Agents SDK on it.

* :class:`Wire` records every exchange of an ``openai`` client with the proxy, through the event hooks of the
  client's own HTTP client: the request body exactly as the client sent it and the proxy's response headers
  (``x-toolmend-repairs``, ``x-toolmend-calls``), for JSON and streamed answers alike.
* :func:`ask` makes one ``responses`` request the three ways the client offers (``create``, ``create`` with
  ``stream=True``, the ``responses.stream`` helper) and answers the final response either way.
* :func:`outputs_for` is what a client sends back for the calls of a response; :func:`arrived_as_emitted`
  checks that items an upstream emitted came back to it unchanged, by value and by their exact bytes.
* For the Agents SDK: :func:`run_config` (its default Responses model, on a given client),
  :func:`forgetful_session` (a session store that does not keep some item types) and the handoff input
  filters :func:`keep_only_outputs` and :func:`without_reasoning` (what filters written by hand remove).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import openai
import orjson
from openai.types.responses import Response

from proxy.dialects.responses.items import call_id_of, is_call, output_type_for
from tests.support.client_tls import TLS
from tests.support.lazy import lazy
from tests.support.strict_upstream import Received

if TYPE_CHECKING:
    from agents import RunConfig, SQLiteSession
    from agents.handoffs import HandoffInputData
    from agents.items import RunItem

agents = lazy("agents")

__all__ = ["MODES", "Exchange", "ForgetfulSession", "Mode", "Wire", "arrived_as_emitted", "ask", "keep_only_outputs",
           "outputs_for", "run_config", "without_reasoning"]

Mode = Literal["create", "create-stream", "stream-helper"]
MODES: tuple[Mode, ...] = ("create", "create-stream", "stream-helper")


@dataclass(frozen=True)
class Exchange:
    """One request a client made: its path, its body as sent, and the headers of the answer it got."""

    path: str
    sent: bytes
    headers: dict[str, str]


@dataclass
class Wire:
    """Every exchange of the clients it made, in order. ``close`` closes the synchronous clients it made,
    ``aclose`` the asynchronous ones (in the event loop they ran in)."""

    exchanges: list[Exchange] = field(default_factory=list)
    clients: list[openai.OpenAI] = field(default_factory=list)
    async_clients: list[openai.AsyncOpenAI] = field(default_factory=list)

    @property
    def last(self) -> Exchange:
        return self.exchanges[-1]

    def _record(self, response: Any) -> None:
        request = response.request
        self.exchanges.append(Exchange(request.url.path, bytes(request.content), {k.lower(): v for k, v in response.headers.items()}))

    def client(self, base_url: str, api_key: str, **options: Any) -> openai.OpenAI:
        http = openai.DefaultHttpxClient(verify=TLS, event_hooks={"response": [self._record]})
        self.clients.append(openai.OpenAI(base_url=base_url, api_key=api_key, http_client=http, max_retries=0, **options))
        return self.clients[-1]

    def close(self) -> None:
        for client in self.clients:
            client.close()

    async def aclose(self) -> None:
        for client in self.async_clients:
            await client.close()

    def async_client(self, base_url: str, api_key: str, **options: Any) -> openai.AsyncOpenAI:
        async def record(response: Any) -> None:
            self._record(response)

        http = openai.DefaultAsyncHttpxClient(verify=TLS, event_hooks={"response": [record]})
        self.async_clients.append(openai.AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=http, max_retries=0, **options))
        return self.async_clients[-1]


def ask(client: openai.OpenAI, mode: Mode, **request: Any) -> Response:
    """One ``POST /v1/responses``, made the way ``mode`` names; the final response object."""
    if mode == "create":
        return client.responses.create(**request)
    if mode == "create-stream":
        with client.responses.create(stream=True, **request) as events:
            final = [event.response for event in events if event.type == "response.completed"]
        assert len(final) == 1, "the stream ended without exactly one response.completed"
        return final[0]
    with client.responses.stream(**request) as stream:
        return stream.get_final_response()


def outputs_for(response: Response, text: Callable[[dict[str, Any]], str] = lambda call: f"{call['name']}: ok") -> list[dict[str, Any]]:
    """The output items a client sends back for the calls of ``response``, in the calls' order, each of its call's family."""
    calls = [item for item in (entry.model_dump(mode="json") for entry in response.output) if is_call(item)]
    return [{"type": output_type_for(call["type"]), "call_id": call_id_of(call), "output": text(call)} for call in calls]


def _run_in(items: list[Any], run: list[dict[str, Any]]) -> bool:
    return any(items[start:start + len(run)] == run for start in range(len(items) - len(run) + 1))


def arrived_as_emitted(received: Received, emitted: Iterable[list[dict[str, Any]]], *, exact_bytes: bool = True) -> None:
    """Every emitted output list (reasoning, then its calls) stands in ``received``'s input as one run of items,
    each equal to what the upstream emitted, and, with ``exact_bytes``, each item's own encoding is in the received
    bytes: nothing was re-encoded (the upstream encodes with orjson, as toolmend does)."""
    items = received.json["input"]
    for output in emitted:
        assert _run_in(items, output), f"emitted items not found in order in the request: {[item.get('id') for item in output]}"
        for item in output if exact_bytes else ():
            assert orjson.dumps(item) in received.body_bytes, f"{item.get('type')} {item.get('call_id', item.get('id'))} was re-encoded"


def run_config(client: openai.AsyncOpenAI) -> RunConfig:
    """The Agents SDK's default model provider (its Responses model) on ``client``, tracing off (nothing leaves loopback)."""
    return agents.RunConfig(model_provider=agents.OpenAIProvider(openai_client=client, use_responses=True), tracing_disabled=True)


def forgetful_session(session_id: str, forgets: Iterable[str]) -> SQLiteSession:
    """An in-memory session store that does not keep items of the ``forgets`` types, as session stores that
    persist only "conversation" items do; the run itself is unaffected, its next run reads the gaps."""
    return _forgetful_session_type()(session_id, frozenset(forgets))


@functools.cache
def _forgetful_session_type() -> type[SQLiteSession]:
    """The class of :func:`forgetful_session`, made on first use: the Agents SDK is imported then."""

    class ForgetfulSession(agents.SQLiteSession):
        def __init__(self, session_id: str, forgets: frozenset[str]) -> None:
            super().__init__(session_id)
            self.forgets = forgets

        async def add_items(self, items: list[Any]) -> None:
            await super().add_items([item for item in items if not (isinstance(item, dict) and item.get("type") in self.forgets)])

    return ForgetfulSession


def _filtered(data: HandoffInputData, drop: tuple[type[RunItem], ...]) -> HandoffInputData:
    def keep(items: tuple[RunItem, ...]) -> tuple[RunItem, ...]:
        return tuple(item for item in items if not isinstance(item, drop))

    return data.clone(pre_handoff_items=keep(data.pre_handoff_items), new_items=keep(data.new_items),
                      input_items=keep(data.input_items) if data.input_items is not None else None)


def keep_only_outputs(data: HandoffInputData) -> HandoffInputData:
    """A handoff input filter that removes the tool *calls* (handoff call included) and reasoning, keeping the outputs."""
    return _filtered(data, (agents.items.ToolCallItem, agents.items.HandoffCallItem, agents.items.ReasoningItem))


def without_reasoning(data: HandoffInputData) -> HandoffInputData:
    """A handoff input filter that removes the reasoning items only: the next agent gets stored calls without them (RS-4)."""
    return _filtered(data, (agents.items.ReasoningItem,))
