"""Builds the Starlette app: routes, and a lifespan that opens the upstream transport and the memory store."""

import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from proxy.access import Access
from proxy.config import Settings
from proxy.credentials import Carriers
from proxy.dialects import DIALECTS, MESSAGES
from proxy.dialects.chat.profiles import route_profile
from proxy.dialects.gemini import VERSIONS
from proxy.endpoint import endpoint
from proxy.errors import error_response
from proxy.forward import Upstream
from proxy.limits import BodyDeadline
from proxy.memory import Store, open_store, redact
from proxy.memory.guarded import GuardedStore
from proxy.memory.refusals import Noted
from proxy.metrics import Metrics
from proxy.observe import Observer
from proxy.passthrough import pass_through
from proxy.protocols import Protocols, protocol_of
from proxy.repair import Policy
from proxy.router import Router, UpstreamRoute
from proxy.state import ProxyState
from proxy.tenant import Tenancy
from proxy.transport import FastTransport

log = logging.getLogger("toolmend")

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
#: The versions whose paths pass through when no dialect repairs them: ``/v1`` (OpenAI's, Anthropic's, Gemini's) and
#: Gemini's others.
PASSED = VERSIONS


def create_app(settings: Settings, transport: httpx.AsyncBaseTransport | None = None, store: Store | None = None) -> Starlette:
    """The proxy as an ASGI app. ``transport`` and ``store`` replace the real ones (tests, benchmarks).

    Tests pass ``httpx.AsyncHTTPTransport()``, which respx intercepts."""

    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        upstream_transport = transport if transport is not None else FastTransport(egress=settings.egress, ca_file=settings.upstream_ca_file)
        carriers = Carriers(settings.credential_header)
        tenancy = _tenancy(settings, carriers)

        def route(upstream: str, profile: str, api_key: str | None, prefix: str | None = None, model: str | None = None) -> UpstreamRoute:
            chosen, by_model = route_profile(upstream, profile)
            how = "configured" if profile != "auto" else "detected from the upstream host"
            how = "by each request's model, else openai" if by_model else f"{chosen.name}, {how}"
            where = f"prefix {prefix}" if prefix else f"model {model}" if model else "default route"
            log.info("%s: forwarding to %s %s (profile %s)", where, upstream, settings.egress.describe(upstream), how)
            forward = Upstream(upstream, upstream_transport, settings.upstream_timeout, api_key, settings.max_upstream_connections,
                               client_keys=settings.client_keys)
            return UpstreamRoute(forward, chosen, prefix, model, tenancy, by_model)

        memory = GuardedStore(store if store is not None else open_store(settings.memory, settings.memory_ttl, settings.memory_max_entries),
                              report=metrics.memory_health, counted=metrics.memory_recalls)
        app.state.proxy = ProxyState(
            settings=settings,
            router=Router(route(settings.upstream, settings.profile, settings.upstream_api_key),
                          tuple(route(r.upstream, r.profile, r.api_key, r.prefix, r.model) for r in settings.routes)),
            access=Access(settings.client_keys, settings.require_client_key, carriers),
            store=memory,
            policy=Policy(orphans=settings.orphan_policy, thinking=settings.thinking_policy, dummy_signatures=settings.dummy_signatures,
                          continue_model_turn=settings.continue_model_turn),
            metrics=metrics,
            refusals=Noted(settings.memory_ttl),
        )
        await _announce_memory(memory, settings, given=store is not None)
        try:
            yield
        finally:
            await upstream_transport.aclose()
            await memory.close()

    # Every repaired endpoint, at /v1 and under each route prefix (``Protocols``: their POSTs go to ``Repaired``);
    # everything else under /v1/ (or another of Gemini's versions) passes through.
    prefixes = [spec.prefix for spec in settings.routes if spec.prefix is not None]
    protocols = Protocols(DIALECTS, prefixes, by_header={b"anthropic-version": MESSAGES})
    prefixed = [Route(prefix + version + "/{path:path}", pass_through, methods=METHODS) for prefix in prefixes for version in PASSED]
    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            *(Route(version + "/{path:path}", pass_through, methods=METHODS) for version in PASSED),
            *prefixed,
        ],
        middleware=[Middleware(Observer, metrics=metrics, protocols=protocols), Middleware(BodyDeadline, seconds=settings.client_timeout),
                    Middleware(Repaired, handlers={dialect.name: endpoint(dialect) for dialect in DIALECTS})],
        exception_handlers={404: not_found, 405: not_allowed},
        lifespan=lifespan,
    )


class Repaired:
    """The repaired endpoints' POSTs go straight to their dialect's plain ASGI handler (``endpoint``), by the protocol the
    observing layer decided for the request (``Protocols``); every other request goes on to Starlette's routing."""

    def __init__(self, app: ASGIApp, handlers: dict[str, ASGIApp]) -> None:
        self.app = app
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            dialect = protocol_of(scope).dialect
            if dialect is not None:
                await self.handlers[dialect.name](scope, receive, send)
                return
        await self.app(scope, receive, send)


def _tenancy(settings: Settings, carriers: Carriers) -> Tenancy:
    if settings.tenant_scope == "upstream":
        log.warning("--tenant-scope upstream: every client of an upstream shares one memory, so any client can recall any "
                    "other's calls; meant for single-user deployments")
        return Tenancy(settings.tenant_scope)
    if settings.tenants:
        log.info("memory kept per named tenant for their keys: %s", ", ".join(tenant.name for tenant in settings.tenants))
    # A route that sends no key of toolmend's admits clients with no credential at all, unless told to refuse them.
    if not settings.require_client_key and (settings.upstream_api_key is None or any(route.api_key is None for route in settings.routes)):
        log.warning("requests that carry no credential (in %s, or ?key=) share one memory per upstream, so any of them can recall "
                    "another's calls: --require-client-key refuses them, --credential-header names a header that carries one",
                    ", ".join(sorted(name.decode() for name in carriers.names)))
    return Tenancy(settings.tenant_scope, settings.tenants, carriers)


async def _announce_memory(memory: GuardedStore, settings: Settings, given: bool) -> None:
    where = "given by the caller" if given else redact(settings.memory)
    if await memory.ready():  # when not, the guard has logged why and keeps retrying
        log.info("memory store %s ready: %s", memory.backend, where)
    if memory.backend == "memory" and settings.workers > 1:
        log.warning("--workers %d with memory://: each worker remembers only the calls it relayed itself; "
                    "use the default SQLite store or redis:// to share them", settings.workers)


async def metrics_endpoint(request: Request) -> Response:
    body, content_type = request.app.state.proxy.metrics.render()
    return Response(body, headers={"content-type": content_type})


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def readyz(request: Request) -> Response:
    state: ProxyState = request.app.state.proxy
    store_ready = await state.store.ready()
    # A store outage degrades repairs (the orphan policy takes over) but the proxy still serves: stay in rotation.
    body = {"status": "ready" if store_ready else "degraded", "memory": {"backend": state.store.backend, "ready": store_ready}}
    return JSONResponse(body)


async def not_found(request: Request, exc: Exception) -> Response:
    return error_response(404, f"toolmend serves /v1/... (and Gemini's /v1beta/...) only: no route for {request.method} "
                               f"{request.url.path}.", code="not_found")


async def not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(405, f"{request.method} is not allowed on {request.url.path}.", code="method_not_allowed")
