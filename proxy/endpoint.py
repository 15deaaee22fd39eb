"""The one request path of every repaired endpoint: read, parse, plan, recall, repair, leave out what the upstream
refused before, forward (once more when the dialect knows a fix for the upstream's refusal), relay and remember.
What differs between Chat Completions, the Responses API and Anthropic Messages is asked of the endpoint's dialect
(``proxy/dialects/dialect.py``); nothing here knows a wire format.

Each step is a small function taking the request's ``Exchange`` (what is known of it so far); ``_answered`` only strings
them together. The endpoint is a plain ASGI app, reached without Starlette's routing (``app.Repaired``). A request that
needs no repair is forwarded as the exact bytes the client sent.
"""

import asyncio
import gc
import logging
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import orjson
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.access import Denied
from proxy.dialects.capture import CaptureLimit
from proxy.dialects.dialect import STREAMED, Blobs, Dialect, Facts, MemoryLook, Planned, RefusalFix, retry
from proxy.dialects.refusal import FirstEvent, Leaving, Refusal, chosen, digest, read
from proxy.disconnect import ClientGone, client_watch
from proxy.errors import Render
from proxy.forward import UpstreamError, is_event_stream
from proxy.logs import RequestLine
from proxy.memory.refusals import refused_among, remember_refused
from proxy.observe import line_of, observe_upstream
from proxy.protocols import Protocol, protocol_of
from proxy.relay import StreamRelay, peek, relay_answer
from proxy.repair import Policy, Profile, Result
from proxy.repair.cancel import Cancel
from proxy.repair.engine import TOO_DEEP
from proxy.repair.findings import CallSource, calls_by_source, summarize_calls
from proxy.router import InvalidPath, UpstreamRoute
from proxy.state import ProxyState
from proxy.turns import Turn, entry_count

log = logging.getLogger("toolmend")
T = TypeVar("T")
#: How work whose cost grows with the body runs: ``_inline`` for a small body, ``_in_thread`` for a large one.
Runner = Callable[..., Awaitable[Any]]

REPAIRS_HEADER = b"x-toolmend-repairs"
#: On repaired requests that had tool calls put back: how many came from memory and how many were made up.
CALLS_HEADER = b"x-toolmend-calls"
#: On responses served while the memory store is down: calls were neither recalled nor stored this time.
MEMORY_HEADER = (b"x-toolmend-memory", b"unavailable")
# The proxy parses the answers to remember tool calls, so it asks the upstream for them uncompressed.
DROP_FOR_REPAIRED = frozenset((b"accept-encoding",))

#: nginx's status for "the client closed the request": logged, never seen by the departed client.
CLIENT_CLOSED_REQUEST = 499

#: Bodies larger than this are parsed with the cycle collector paused, and checked and repaired in a thread with
#: the heap as it was frozen for the collector. Below it, the thread hand-off costs more than it saves (the figure
#: behind it: bench/README.md).
LARGE_BODY_BYTES = 256 * 1024
#: What one recalled entry (a call, item or block the repair may put back) weighs against LARGE_BODY_BYTES: the
#: repair views, re-inserts and encodes it, about the work a kilobyte of body takes.
RECALLED_ENTRY_BYTES = 1024

#: An upstream error a dialect may retry (``Dialect.retries``) is read up to this size to ask the dialect; a larger one
#: goes to the client as it arrives.
REFUSAL_BYTES = 64 * 1024

#: The repairs of a request that needed none (never changed).
NO_REPAIRS: Counter[str] = Counter()
NO_CALLS: Counter[CallSource] = Counter()  # as NO_REPAIRS: read, never added to


class BodyTooLarge(Exception):
    pass


class Refused(Exception):
    """A step ends the request early with this answer (an error in the dialect's shape, mostly)."""

    def __init__(self, response: Response) -> None:
        self.response = response


@dataclass(slots=True, eq=False)
class Exchange:
    """One request through a repaired endpoint, from its head to its answer; each named step of the handler takes it
    and fills in what it decides. Known from the head: the ASGI ``scope`` and ``receive``, the proxy's ``state``, the
    ``dialect``, the request's log ``line`` and its ``protocol`` (decided once when its head arrived, ``proxy/protocols.py``: its
    ``error`` shape and its metrics label). Then ``_read_request`` sets the ``body`` as read, ``parsed`` and what was
    ``mended``; ``_routed`` the ``facts`` the dialect reads off the target and body (model, stream), the ``route``,
    the ``path`` asked for upstream, the memory scope (``memory``) and the dialect's ``profile``."""

    scope: Scope
    receive: Receive
    state: ProxyState
    dialect: Dialect
    line: RequestLine
    protocol: Protocol
    body: bytes = field(init=False)
    parsed: dict = field(init=False)
    mended: Counter[str] = field(init=False)
    facts: Facts = field(init=False)
    route: UpstreamRoute = field(init=False)
    path: bytes = field(init=False)
    memory: str = field(init=False)
    profile: Profile = field(init=False)

    @property
    def error(self) -> Render:
        return self.protocol.error

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return self.scope["headers"]

    @property
    def query(self) -> bytes:
        return self.scope["query_string"]


def endpoint(dialect: Dialect) -> ASGIApp:
    """The plain ASGI app that repairs ``dialect``'s requests (the application sends it their POSTs only)."""

    async def handle(scope: Scope, receive: Receive, send: Send) -> None:
        exchange = Exchange(scope, receive, scope["app"].state.proxy, dialect, line_of(scope), protocol_of(scope))
        try:
            answer = await _answered(exchange)
        except Refused as refused:
            answer = refused.response
        await answer(scope, receive, send)

    return handle


async def _answered(exchange: Exchange) -> Response | StreamRelay:
    """The answer to the request: read, routed, repaired, forwarded (once more where the dialect knows a fix for the
    upstream's refusal) and relayed, its turns remembered; ``Refused`` by a step that ends it early."""
    state, dialect = exchange.state, exchange.dialect
    try:
        # Refused before the body is read when no route the model could pick would admit this client.
        state.access.check(exchange.headers, exchange.query, state.router.candidates(exchange.scope["raw_path"], exchange.query))
        await _read_request(exchange)
        _routed(exchange)
        sent = await _unrefused(exchange, await _repair_request(exchange))
        answer = await _forward(exchange, sent.body)
        extra_headers = sent.headers
        if dialect.retries(answer.status_code, state.policy) and _may_refuse(answer):
            answer, extra_headers = await _retried(exchange, sent, answer)
    except (InvalidPath, Denied) as refusal:
        return refusal.response(exchange.error)
    if not state.store.available:
        extra_headers.append(MEMORY_HEADER)
        exchange.line.memory = "unavailable"
    memory = exchange.memory

    async def remember(turns: list[Turn]) -> None:
        await state.store.remember(memory, turns)

    limit = CaptureLimit(state.settings.max_capture_bytes, state.metrics.capture_gave_up)
    return await relay_answer(answer, dialect.capture, remember, limit, extra_headers, streamed=exchange.facts.streams)


def memory_scope(tenant: str, dialect: Dialect) -> str:
    """Whose memory, and of which protocol: a turn is recalled only by requests of the dialect that made it.
    Chat keeps the bare tenant, so what was remembered before dialects existed is still found."""
    return tenant if dialect.name == "chat" else f"{tenant}/{dialect.name}"


async def _read_request(exchange: Exchange) -> None:
    """The body as sent and parsed, within the size, time and history-length limits; or, where the dialect
    mends a body the parser refused (``Dialect.mend``), the mended body and what was mended, by rule code."""
    error, dialect, settings = exchange.error, exchange.dialect, exchange.state.settings
    exchange.mended = NO_REPAIRS
    try:
        body = await read_body(exchange.headers, exchange.receive, settings.max_body_bytes)  # in time: limits.BodyDeadline
    except BodyTooLarge:
        raise Refused(error(413, f"Request body is larger than {settings.max_body_bytes} bytes (--max-body-bytes).",
                            code="request_too_large")) from None
    except ClientDisconnect:
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    try:
        parsed = _parse(body)
    except orjson.JSONDecodeError as exc:
        fixed = dialect.mend(body, exc)
        if fixed is None:
            raise Refused(error(400, f"We could not parse the JSON body of your request: {exc}", code="invalid_json")) from None
        body, exchange.mended = fixed
        try:
            parsed = _parse(body)
        except orjson.JSONDecodeError as still:
            raise Refused(error(400, f"We could not parse the JSON body of your request: {still}", code="invalid_json")) from None
    if type(parsed) is not dict:
        raise Refused(error(400, "The request body must be a JSON object.", code="invalid_json"))
    most = settings.max_messages
    # Every entry counted takes two bytes of the body at least (a value and a comma): a body shorter than twice the
    # limit cannot pass it, and most bodies are not walked at all.
    if len(body) >= 2 * most and dialect.history_length(parsed, most) > most:
        raise Refused(error(
            400, f"`{dialect.history_key}` holds more than {most} entries ({dialect.history_entries}); this proxy accepts at most {most} "
                 "(--max-messages).", param=dialect.history_key, code="too_many_messages"))
    exchange.body, exchange.parsed = body, parsed


def _routed(exchange: Exchange) -> None:
    """The request's facts as its dialect reads them (the model, from the body or the path), its route by target and
    model (admission checked again on it), its memory scope and its profile, on the log line too."""
    state, dialect, headers, query = exchange.state, exchange.dialect, exchange.headers, exchange.query
    target = exchange.scope["raw_path"]
    facts = exchange.facts = dialect.facts(target, exchange.parsed)
    route, exchange.path = state.router.select(target, query, facts.model)
    state.access.check(headers, query, (route,))
    exchange.route = route
    exchange.memory = memory_scope(route.tenant(headers, query), dialect)
    chosen = route.profile_for(facts.model)
    exchange.line.tenant, exchange.line.profile = exchange.memory[:8], chosen.name
    exchange.profile = dialect.profile(chosen.name)


async def _repair_request(exchange: Exchange) -> "Sent":
    """What to send upstream: the client's own bytes (or the bytes as mended before parsing), or the repaired
    body, with what was done by rule code and the headers saying so.

    The engine's work on a large body runs in a thread so that other clients are not kept waiting (the
    engine is pure Python, which gives the event loop the interpreter back every few milliseconds), with the
    heap frozen for the cycle collector (``heap_frozen``); so does the repair of a small body that recalls large
    turns (``_runner``), watching the client meanwhile (``_repaired_beside``)."""
    state, dialect, body, mended = exchange.state, exchange.dialect, exchange.body, exchange.mended
    planned = await _runner(body)(dialect.plan, exchange.parsed, exchange.profile, exchange.facts, state.policy)
    outgoing: bytes | None = body
    counts, calls = NO_REPAIRS, NO_CALLS
    recalled = await state.store.recall(exchange.memory, planned.recall) if planned is not None and planned.recall else {}
    # A plan that only looks in memory has nothing to compare when memory holds none of its turns: no repair runs.
    if planned is not None and (recalled or not isinstance(planned, MemoryLook) or planned.broken):
        if _runner(body, recalled) is _inline:  # on the loop, at once: no client can leave meanwhile
            result, repaired, counts, calls = _repaired(planned, recalled, state.policy, None)
        else:
            result, repaired, counts, calls = await _repaired_beside(exchange, planned, recalled)
        if result.rejected is not None:
            raise Refused(dialect.rejection(result.rejected))
        if result.changed:
            outgoing = repaired
    if outgoing is None:
        raise Refused(exchange.error(400, f"toolmend cannot repair this request: {TOO_DEEP}.", code="toolmend_too_deep"))
    if not (mended or counts):
        return Sent(body, exchange.parsed, NO_REPAIRS, [])
    repairs = mended + counts
    return Sent(outgoing, exchange.parsed if outgoing is body else None, repairs, _reported(exchange, repairs, calls))


async def _repaired_beside(exchange: Exchange, planned: Planned,
                           recalled: dict[str, Turn]) -> tuple[Result, bytes | None, Counter[str], Counter[CallSource]]:
    """``_repaired`` in a thread, watching the client: one that leaves ends the request (499), and the engine,
    cancelled, stops at its next rule instead of repairing for no one."""
    cancel = Cancel()
    try:
        with client_watch(exchange.receive):
            return await _in_thread(_repaired, planned, recalled, exchange.state.policy, cancel)
    except ClientGone:
        log.info("client left during the repair; repair stopped")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    finally:
        cancel.set()  # a thread still repairing (its client gone, or the server stopping) stops at its next rule


def _reported(exchange: Exchange, counts: Counter[str], calls: Counter[CallSource],
              earlier: Counter[str] = NO_REPAIRS) -> list[tuple[bytes, bytes]]:
    """What was repaired, counted by rule code, on the log line, in the metrics and in the response headers; after
    what the request's ``earlier`` repairs reported (only ``counts`` are counted again)."""
    line, metrics, profile = exchange.line, exchange.state.metrics, exchange.profile.name
    line.repairs = summarize(earlier + counts if earlier else counts)
    for code, count in counts.items():
        metrics.repairs.labels(code, profile).inc(count)
    headers = [(REPAIRS_HEADER, line.repairs.encode())]
    if calls:
        line.calls = summarize_calls(calls)
        for source, count in calls.items():
            metrics.calls_reinserted.labels(source, profile).inc(count)
        headers.append((CALLS_HEADER, line.calls.encode()))
    return headers


@dataclass(frozen=True, slots=True)
class Sent:
    """What goes upstream: the body, parsed when that is the client's body as read (else None: parsed when needed),
    with what was repaired by rule code and the headers saying so."""

    body: bytes
    parsed: dict | None
    repairs: Counter[str]
    headers: list[tuple[bytes, bytes]]

    def json(self) -> dict:
        return self.parsed if self.parsed is not None else _parse(self.body)

    def changed(self, exchange: Exchange, body: bytes, counts: Counter[str]) -> "Sent":
        """This, with ``body`` instead and ``counts`` more repairs, reported (the request's earlier ones not again)."""
        calls = [header for header in self.headers if header[0] != REPAIRS_HEADER]
        return Sent(body, None, self.repairs + counts, [*_reported(exchange, counts, Counter(), self.repairs), *calls])


async def _unrefused(exchange: Exchange, sent: Sent) -> Sent:
    """``sent`` without the signatures or blobs the upstream refused before in this memory scope (remembered by
    ``_retried``; asked of the store only for a scope this process saw a refusal in), when it carries any."""
    state = exchange.state
    if not state.refusals.has(exchange.memory):  # the usual answer, and the cheapest question: asked first
        return sent
    fix = exchange.dialect.remembered_fix(state.policy)
    if fix is None or fix.blobs is None:
        return sent
    # Parsing, walking and hashing a large body are work like its repair: beside the event loop too.
    run = _runner(sent.body)
    body, carried = await run(_carried, fix.blobs, sent)
    refused = await refused_among(state.store, exchange.memory, carried) if carried else frozenset()
    if not refused:
        return sent
    made = await run(retry, fix, body, exchange.profile, state.policy, Leaving(refused, remembered=True))
    return sent if made is None else sent.changed(exchange, *made)


def _carried(blobs: Blobs, sent: Sent) -> tuple[dict, list[str]]:
    """What ``sent`` is, parsed, and the digests of the signatures or blobs it carries."""
    body = sent.json()
    return body, _digests(blobs, body)


def _digests(blobs: Blobs, body: dict) -> list[str]:
    return [digest(blob) for blob in blobs.carried(body) if type(blob) is str]


async def _retried(exchange: Exchange, sent: Sent, answer: httpx.Response) -> tuple[httpx.Response, list[tuple[bytes, bytes]]]:
    """An answer that may be a refusal the dialect knows a fix for (Messages: a 400 refusing a thinking signature,
    AM-14, under thinking policy ``drop``): its error body is read, up to ``REFUSAL_BYTES`` (of a stream of status
    200, its first event only), and when the dialect makes a body of what was sent, leaving out what memory did not
    capture for this scope where it knows, that body goes once more to the same upstream with the same headers, what
    it changed joining the request's repairs in the headers, the log line and the metrics. What the retry left out is
    remembered as refused when its answer is a success. Any other answer, a larger or unreadable one, and the answer
    to the retry, whatever it is, go on to the client as the upstream sent them."""
    state = exchange.state
    try:
        with client_watch(exchange.receive):
            refusal = await _refusal(answer)
    except ClientGone:
        await answer.aclose()
        log.info("client left before the upstream's refusal was read; upstream request closed")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    fix = exchange.dialect.fix_for(refusal, state.policy) if refusal is not None else None
    if fix is None or refusal is None:
        return answer, sent.headers
    body = sent.json()
    run = _runner(sent.body)
    leaving = await _leaving(exchange, fix, refusal, body, sent.body)
    made = await run(retry, fix, body, exchange.profile, state.policy, leaving)
    if made is None:
        return answer, sent.headers
    await answer.aclose()  # its upstream slot goes back before the retry takes one
    again = await _forward(exchange, made[0])
    if fix.blobs is not None and again.is_success:
        left = leaving.digests if leaving.digests is not None else await run(_digests, fix.blobs, body)
        await remember_refused(state.store, exchange.memory, exchange.dialect.name, left)
        state.refusals.note(exchange.memory)
    return again, sent.changed(exchange, *made).headers


def _may_refuse(answer: httpx.Response) -> bool:
    """Whether an answer of a status ``Dialect.retries`` names can be a refusal at all: one of status 200 only when it
    is an event stream (whose first event may be one); a JSON success is relayed without a look."""
    # The raw headers, as the relay reads them: httpx's ``headers.get`` decodes every header of the answer first.
    return answer.status_code != STREAMED or is_event_stream(answer.headers.raw)


async def _refusal(answer: httpx.Response) -> Refusal | None:
    """What an answer ``Dialect.retries`` says may be a refusal (``_may_refuse``) says: its error body read whole (up to
    ``REFUSAL_BYTES``), or, for an event stream of status 200, its first event; None when it is no refusal."""
    if answer.status_code != STREAMED:
        error = await peek(answer, REFUSAL_BYTES)
        return read(answer.status_code, error, answer.headers) if error is not None else None
    first = FirstEvent(REFUSAL_BYTES)
    await peek(answer, REFUSAL_BYTES, first.read)
    return first.refusal


async def _leaving(exchange: Exchange, fix: RefusalFix, refusal: Refusal, body: dict, raw: bytes) -> Leaving:
    """What the retry of ``body`` (``raw`` as sent) after ``refusal`` leaves out: for signed thinking or encrypted
    reasoning, what memory did not capture in this scope (``refusal.chosen``); the walks and digests where ``_runner``
    says, the recalled turns weighed in."""
    if fix.blobs is None:
        return Leaving(refusal=refusal)
    carried, keys = await _runner(raw)(_looked_up, fix.blobs, body)
    turns = await exchange.state.store.recall(exchange.memory, keys) if keys else {}
    return await _runner(raw, turns)(_chosen, fix.blobs, refusal, carried, turns)


def _looked_up(blobs: Blobs, body: dict) -> tuple[list[Any], list[str]]:
    """The signatures or blobs ``body`` carries, and the ids of the remembered turns that may hold them."""
    carried = blobs.carried(body)
    return carried, blobs.recall_keys(body) if carried else []


def _chosen(blobs: Blobs, refusal: Refusal, carried: list[Any], turns: dict[str, Turn]) -> Leaving:
    minted = frozenset(digest(blob) for turn in {id(turn): turn for turn in turns.values()}.values()
                       for blob in blobs.minted(turn) if type(blob) is str)
    return chosen(refusal, carried, minted)


async def _forward(exchange: Exchange, outgoing: bytes) -> httpx.Response:
    """Send upstream and wait for the answer's head, giving up if the client leaves meanwhile."""
    state, line = exchange.state, exchange.line
    upstream = exchange.route.upstream
    sending = upstream.send(
        "POST",
        upstream.url(exchange.path, exchange.query, exchange.headers),
        upstream.request_headers(exchange.headers, DROP_FOR_REPAIRED, exchange.query),
        outgoing,
    )
    started = time.perf_counter()
    try:
        with client_watch(exchange.receive):
            answer = await sending
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        raise Refused(exc.response(exchange.error)) from None
    except ClientGone:
        log.info("client left before the upstream answered; upstream request cancelled")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    observe_upstream(state.metrics, line, exchange.protocol.label, answer, started)
    return answer


async def read_body(headers: list[tuple[bytes, bytes]], receive: Receive, limit: int) -> bytes:
    """The request body, read off ``receive``; ``BodyTooLarge`` past ``limit`` bytes (declared or sent),
    ``ClientDisconnect`` when the client leaves first."""
    for name, value in headers:
        if name == b"content-length":  # ASGI servers give header names in lower case
            if value.isdigit() and int(value) > limit:
                raise BodyTooLarge
            break
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        if not message.get("more_body", False):
            if not chunks:
                return chunk  # the whole body in one message: most requests
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def _parse(body: bytes) -> Any:
    """``orjson.loads``; for a large body, with the cycle collector paused. The parse holds the interpreter
    throughout (a thread would not help), and the collections its allocations trigger walk the growing tree
    again and again, a stall for every other client."""
    return orjson.loads(body) if len(body) <= LARGE_BODY_BYTES else collector_paused(orjson.loads, body)


def collector_paused(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` with Python's cycle collector paused, for work that holds the interpreter throughout (the
    parse: no other code runs meanwhile). Left as it is when already paused (by the application)."""
    if not gc.isenabled():
        return function(*args)
    gc.disable()
    try:
        return function(*args)
    finally:
        gc.enable()


def heap_frozen(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` with every object that exists when it starts left out of the cycle collector's passes
    until it ends (``gc.freeze``): a large body's check and repair allocate objects by the hundred thousand, and the
    collections they trigger would walk the parsed body and the rest of the heap again and again. Not a pause: the work runs beside the event loop, and the
    collector goes on collecting what both make; what was frozen is back in the oldest generation when any such
    work ends, so nothing stays out of the collector's reach longer than one repair. Meanwhile the youngest
    generation is collected every YOUNG_OBJECTS new objects rather than every 700 (``_YOUNG``), so that the passes
    do not walk the repair's own growing view again and again."""
    with _YOUNG:
        gc.freeze()
        try:
            return function(*args)
        finally:
            gc.unfreeze()


#: How many new objects the youngest generation holds while large work runs before the collector passes over it: a
#: bound on what waits for a pass (a few megabytes), far above Python's 700.
YOUNG_OBJECTS = 20_000


class _YoungThreshold:
    """While any large work runs (in any thread), the youngest generation's threshold is YOUNG_OBJECTS; the last
    to end puts back the one it found."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._found = gc.get_threshold()

    def __enter__(self) -> None:
        with self._lock:
            if not self._running:
                self._found = gc.get_threshold()
                gc.set_threshold(max(YOUNG_OBJECTS, self._found[0]), *self._found[1:])
            self._running += 1

    def __exit__(self, *_: object) -> None:
        with self._lock:
            self._running -= 1
            if not self._running:
                gc.set_threshold(*self._found)


_YOUNG = _YoungThreshold()


def _runner(body: bytes, recalled: dict[str, Turn] | None = None) -> Runner:
    """Where the engine's work on ``body`` runs: in a thread (``_in_thread``) when the body, with the entries of the
    turns recalled for it (RECALLED_ENTRY_BYTES each), is larger than LARGE_BODY_BYTES; else on the event loop. Each
    recalled turn's entries are counted once, off its list (``entry_count``): nothing recalled is walked here."""
    if not recalled:
        return _in_thread if len(body) > LARGE_BODY_BYTES else _inline
    turns = {id(turn): turn for turn in recalled.values()}.values()
    weight = len(body) + RECALLED_ENTRY_BYTES * sum(entry_count(turn) for turn in turns)
    return _in_thread if weight > LARGE_BODY_BYTES else _inline


async def _inline(function: Callable[..., T], *args: Any) -> T:
    return function(*args)


async def _in_thread(function: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(heap_frozen, function, *args)


def _repaired(planned: Planned, recalled: dict[str, Turn], policy: Policy,
              cancel: Cancel | None) -> tuple[Result, bytes | None, Counter[str], Counter[CallSource]]:
    """The engine's result; when it changed the body, the body to send (None if too deep to encode), the
    findings counted by rule code and the calls they put back counted by source (a large history can have
    hundreds of thousands of findings: counted here, in the thread, too). ``Cancelled`` once ``cancel`` is set."""
    result = planned.repair(recalled, policy, cancel)
    if not result.changed:
        return result, None, NO_REPAIRS, NO_CALLS
    counts = Counter(finding.code for finding in result.findings)
    calls = calls_by_source(result.findings)
    try:
        return result, orjson.dumps(result.body), counts, calls
    except orjson.JSONEncodeError:
        return result, None, counts, calls


def summarize(counts: Counter[str]) -> str:
    """Rule codes with counts, in first-seen order: ``TM101=1,TM104=2``."""
    return ",".join(f"{code}={count}" for code, count in counts.items())
