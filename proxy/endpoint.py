"""The one request path of every repaired endpoint: read, parse, plan, recall, repair, leave out what the upstream
refused before, forward (once more when the dialect knows a fix for the upstream's refusal), relay and remember.
What differs between Chat Completions, the Responses API and Anthropic Messages is asked of the endpoint's dialect
(``proxy/dialects/dialect.py``); nothing here knows a wire format.

Each step is a small function; the handler only strings them together. A request that needs no repair is forwarded
as the exact bytes the client sent.
"""

import asyncio
import gc
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from proxy.access import Denied
from proxy.config import Settings
from proxy.dialects.capture import CaptureLimit
from proxy.dialects.dialect import STREAMED, Blobs, Dialect, Planned, RefusalFix, Target, retry
from proxy.dialects.refusal import FirstEvent, Leaving, Refusal, chosen, digest, read
from proxy.disconnect import ClientGone, client_watch
from proxy.forward import UpstreamError
from proxy.logs import RequestLine
from proxy.memory.refusals import refused_among, remember_refused
from proxy.observe import line_of, observe_upstream
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
Handler = Callable[[Request], Awaitable[Response | StreamRelay]]
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
#: the heap as it was frozen for the collector. A broken history of this size (about 2,000 messages) takes some
#: 10 ms to repair; below it, the thread hand-off would cost more than it saves.
LARGE_BODY_BYTES = 256 * 1024
#: What one recalled entry (a call, item or block the repair may put back) weighs against LARGE_BODY_BYTES: the
#: repair views, re-inserts and encodes it, about the work a kilobyte of body takes.
RECALLED_ENTRY_BYTES = 1024

#: An upstream error a dialect may retry (``Dialect.retries``) is read up to this size to ask the dialect; a larger one
#: goes to the client as it arrives.
REFUSAL_BYTES = 64 * 1024

#: The repairs of a request that needed none (never changed).
NO_REPAIRS: Counter[str] = Counter()


class BodyTooLarge(Exception):
    pass


class Refused(Exception):
    """A step ends the request early with this answer (an error in the dialect's shape, mostly)."""

    def __init__(self, response: Response) -> None:
        self.response = response


def endpoint(dialect: Dialect) -> Handler:
    """The Starlette endpoint that repairs ``dialect``'s requests."""

    async def handle(request: Request) -> Response | StreamRelay:
        state: ProxyState = request.app.state.proxy
        line = line_of(request.scope)
        headers, query = request.headers.raw, request.scope["query_string"]
        try:
            target = request.scope["raw_path"]
            # Refused before the body is read when no route the model could pick would admit this client.
            state.access.check(headers, query, state.router.candidates(target, query))
            body, parsed, mended = await _read_request(request, dialect, state.settings)
            aim = dialect.target(target, parsed)
            route, path = state.router.select(target, query, aim.model)
            state.access.check(headers, query, (route,))
            scope = memory_scope(route.tenant(headers, query), dialect)
            chosen = route.profile_for(aim.model)
            line.tenant, line.profile = scope[:8], chosen.name
            profile = dialect.profile(chosen.name)
            read = Read(body, parsed, mended, aim)
            outgoing, repairs, extra_headers = await _repair_request(request, dialect, profile, scope, read, line)
            exchange = Exchange(request, state, dialect, route, path, profile, scope, line)
            sent = Sent(outgoing, parsed if outgoing is body else None, repairs, extra_headers)
            sent = await _unrefused(exchange, sent)
            answer = await _forward(exchange, sent.body)
            extra_headers = sent.headers
            if dialect.retries(answer.status_code, state.policy):
                answer, extra_headers = await _retried(exchange, sent, answer)
        except Refused as refused:
            return refused.response
        except (InvalidPath, Denied) as refusal:
            return refusal.response(dialect.error)
        if not state.store.available:
            extra_headers.append(MEMORY_HEADER)
            line.memory = "unavailable"

        async def remember(turns: list[Turn]) -> None:
            await state.store.remember(scope, turns)

        limit = CaptureLimit(state.settings.max_capture_bytes, state.metrics.capture_gave_up)
        return await relay_answer(answer, dialect.capture, remember, limit, extra_headers, streamed=aim.streamed)

    return handle


def memory_scope(tenant: str, dialect: Dialect) -> str:
    """Whose memory, and of which protocol: a turn is recalled only by requests of the dialect that made it.
    Chat keeps the bare tenant, so what was remembered before dialects existed is still found."""
    return tenant if dialect.name == "chat" else f"{tenant}/{dialect.name}"


async def _read_request(request: Request, dialect: Dialect, settings: Settings) -> tuple[bytes, dict, Counter[str]]:
    """The body as sent and parsed, within the size, time and history-length limits; or, where the dialect
    mends a body the parser refused (``Dialect.mend``), the mended body and what was mended, by rule code."""
    error = dialect.error
    try:
        body = await read_body(request, settings.max_body_bytes)  # in time: limits.BodyDeadline
    except BodyTooLarge:
        raise Refused(error(413, f"Request body is larger than {settings.max_body_bytes} bytes (--max-body-bytes).",
                            code="request_too_large")) from None
    except ClientDisconnect:
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    mended: Counter[str] = Counter()
    try:
        parsed = _parse(body)
    except orjson.JSONDecodeError as exc:
        fixed = dialect.mend(body, exc)
        if fixed is None:
            raise Refused(error(400, f"We could not parse the JSON body of your request: {exc}", code="invalid_json")) from None
        body, mended = fixed
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
    return body, parsed, mended


@dataclass(frozen=True, slots=True)
class Read:
    """The request as read: its body as sent (or as mended before parsing, with what was mended by rule code), parsed,
    and what its path and body say (``Dialect.target``)."""

    body: bytes
    parsed: dict
    mended: Counter[str]
    target: Target


async def _repair_request(request: Request, dialect: Dialect, profile: Profile, scope: str, read: Read,
                          line: RequestLine) -> tuple[bytes, Counter[str], list[tuple[bytes, bytes]]]:
    """What to send upstream: the client's own bytes (or the bytes as mended before parsing), or the repaired
    body, with what was done by rule code and the headers saying so.

    The engine's work on a large body runs in a thread so that other clients are not kept waiting (the
    engine is pure Python, which gives the event loop the interpreter back every few milliseconds), with the
    heap frozen for the cycle collector (``heap_frozen``); so does the repair of a small body that recalls large
    turns (``_runner``), watching the client meanwhile (``_repaired_beside``)."""
    state: ProxyState = request.app.state.proxy
    body, mended = read.body, read.mended
    planned = await _runner(body)(read.target.plan, read.parsed, profile)
    outgoing: bytes | None = body
    counts: Counter[str] = Counter()
    calls: Counter[CallSource] = Counter()
    if planned is not None:
        recalled = await state.store.recall(scope, planned.recall) if planned.recall else {}
        if _runner(body, recalled) is _inline:  # on the loop, at once: no client can leave meanwhile
            result, repaired, counts, calls = _repaired(planned, recalled, state.policy, None)
        else:
            result, repaired, counts, calls = await _repaired_beside(request, planned, recalled, state.policy)
        if result.rejected is not None:
            raise Refused(dialect.rejection(result.rejected))
        if result.changed:
            outgoing = repaired
    if outgoing is None:
        raise Refused(dialect.error(400, f"toolmend cannot repair this request: {TOO_DEEP}.", code="toolmend_too_deep"))
    if not (mended or counts):
        return body, NO_REPAIRS, []
    repairs = mended + counts
    return outgoing, repairs, _reported(state, profile, repairs, calls, line)


async def _repaired_beside(request: Request, planned: Planned, recalled: dict[str, Turn],
                           policy: Policy) -> tuple[Result, bytes | None, Counter[str], Counter[CallSource]]:
    """``_repaired`` in a thread, watching the client: one that leaves ends the request (499), and the engine,
    cancelled, stops at its next rule instead of repairing for no one."""
    cancel = Cancel()
    try:
        with client_watch(request.receive):
            return await _in_thread(_repaired, planned, recalled, policy, cancel)
    except ClientGone:
        log.info("client left during the repair; repair stopped")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    finally:
        cancel.set()  # a thread still repairing (its client gone, or the server stopping) stops at its next rule


def _reported(state: ProxyState, profile: Profile, counts: Counter[str], calls: Counter[CallSource], line: RequestLine,
              earlier: Counter[str] = NO_REPAIRS) -> list[tuple[bytes, bytes]]:
    """What was repaired, counted by rule code, on the log line, in the metrics and in the response headers; after
    what the request's ``earlier`` repairs reported (only ``counts`` are counted again)."""
    line.repairs = summarize(earlier + counts if earlier else counts)
    for code, count in counts.items():
        state.metrics.repairs.labels(code, profile.name).inc(count)
    headers = [(REPAIRS_HEADER, line.repairs.encode())]
    if calls:
        line.calls = summarize_calls(calls)
        for source, count in calls.items():
            state.metrics.calls_reinserted.labels(source, profile.name).inc(count)
        headers.append((CALLS_HEADER, line.calls.encode()))
    return headers


@dataclass(frozen=True, slots=True)
class Exchange:
    """What the steps after the repair share: the client's request, the proxy, the dialect, the route and path its
    request goes to, its profile, its memory scope and its log line."""

    request: Request
    state: ProxyState
    dialect: Dialect
    route: UpstreamRoute
    path: bytes
    profile: Profile
    scope: str
    line: RequestLine


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

    def changed(self, exchange: "Exchange", body: bytes, counts: Counter[str]) -> "Sent":
        """This, with ``body`` instead and ``counts`` more repairs, reported (the request's earlier ones not again)."""
        state, line = exchange.state, exchange.line
        calls = [header for header in self.headers if header[0] != REPAIRS_HEADER]
        return Sent(body, None, self.repairs + counts,
                    [*_reported(state, exchange.profile, counts, Counter(), line, self.repairs), *calls])


async def _unrefused(exchange: Exchange, sent: Sent) -> Sent:
    """``sent`` without the signatures or blobs the upstream refused before in this memory scope (remembered by
    ``_retried``; asked of the store only for a scope this process saw a refusal in), when it carries any."""
    state = exchange.state
    fix = exchange.dialect.remembered_fix(state.policy)
    if fix is None or fix.blobs is None or not state.refusals.has(exchange.scope):
        return sent
    # Parsing, walking and hashing a large body are work like its repair: beside the event loop too.
    run = _runner(sent.body)
    body, carried = await run(_carried, fix.blobs, sent)
    refused = await refused_among(state.store, exchange.scope, carried) if carried else frozenset()
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
        with client_watch(exchange.request.receive):
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
        await remember_refused(state.store, exchange.scope, exchange.dialect.name, left)
        state.refusals.note(exchange.scope)
    return again, sent.changed(exchange, *made).headers


async def _refusal(answer: httpx.Response) -> Refusal | None:
    """What an answer ``Dialect.retries`` says may be a refusal says: its error body read whole (up to
    ``REFUSAL_BYTES``), or, for an event stream of status 200, its first event; None when it is no refusal."""
    if answer.status_code != STREAMED:
        error = await peek(answer, REFUSAL_BYTES)
        return read(answer.status_code, error, answer.headers) if error is not None else None
    if not answer.headers.get("content-type", "").startswith("text/event-stream"):
        return None
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
    turns = await exchange.state.store.recall(exchange.scope, keys) if keys else {}
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
    request, state, line = exchange.request, exchange.state, exchange.line
    upstream = exchange.route.upstream
    sending = upstream.send(
        "POST",
        upstream.url(exchange.path, request.scope["query_string"], request.headers.raw),
        upstream.request_headers(request.headers.raw, DROP_FOR_REPAIRED, request.scope["query_string"]),
        outgoing,
    )
    started = time.perf_counter()
    try:
        with client_watch(request.receive):
            answer = await sending
    except UpstreamError as exc:
        state.metrics.upstream_errors.labels(exc.code).inc()
        raise Refused(exc.response(exchange.dialect.error)) from None
    except ClientGone:
        log.info("client left before the upstream answered; upstream request cancelled")
        raise Refused(Response(status_code=CLIENT_CLOSED_REQUEST)) from None
    observe_upstream(state.metrics, line, exchange.dialect.name, answer, started)
    return answer


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(body: bytes) -> Any:
    """``orjson.loads``; for a large body, with the cycle collector paused. The parse holds the interpreter
    throughout (a thread would not help), and the collections its allocations trigger walk the growing tree
    again and again: 25 MB took 1.5 s instead of 0.4 s, all of it a stall for every other client."""
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
    collections they trigger walked the parsed body and the rest of the heap again and again (6 % of the
    instructions of the bench's Messages repair). Not a pause: the work runs beside the event loop, and the
    collector goes on collecting what both make; what was frozen is back in the oldest generation when any such
    work ends, so nothing stays out of the collector's reach longer than one repair."""
    gc.freeze()
    try:
        return function(*args)
    finally:
        gc.unfreeze()


def _runner(body: bytes, recalled: dict[str, Turn] | None = None) -> Runner:
    """Where the engine's work on ``body`` runs: in a thread (``_in_thread``) when the body, with the entries of the
    turns recalled for it (RECALLED_ENTRY_BYTES each), is larger than LARGE_BODY_BYTES; else on the event loop. Each
    recalled turn's entries are counted once, off its list (``entry_count``): nothing recalled is walked here."""
    turns = {id(turn): turn for turn in recalled.values()}.values() if recalled else ()
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
        return result, None, Counter(), Counter()
    counts = Counter(finding.code for finding in result.findings)
    calls = calls_by_source(result.findings)
    try:
        return result, orjson.dumps(result.body), counts, calls
    except orjson.JSONEncodeError:
        return result, None, counts, calls


def summarize(counts: Counter[str]) -> str:
    """Rule codes with counts, in first-seen order: ``TM101=1,TM104=2``."""
    return ",".join(f"{code}={count}" for code, count in counts.items())
