"""Settings from command-line flags and ``TOOLMEND_*`` environment variables, checked once at start-up.

A flag wins over its environment variable, which wins over the default. Every problem is reported as a
one-line ``ConfigError`` that says what is wrong and how to fix it.
"""

import math
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from proxy.credentials import header_names, key_list
from proxy.dialects.chat.profiles import PROFILES
from proxy.egress import Egress, from_environment
from proxy.logs import LOG_FORMATS
from proxy.memory import check_url as check_memory_url
from proxy.memory import default_url as default_memory_url
from proxy.memory import redact as redact_memory_url
from proxy.repair import ORPHAN_POLICIES, OrphanPolicy
from proxy.repair.findings import THINKING_POLICIES, ThinkingPolicy
from proxy.routes import RouteError, RouteSpec, load_routes
from proxy.tenant import TENANT_SCOPES, NamedTenant

LOG_LEVELS = ("debug", "info", "warning", "error")


class ConfigError(Exception):
    """A setting that cannot work; the message names it and says how to fix it."""


def flag(raw: object) -> bool:
    """A yes/no setting: ``true``/``false`` (also 1/0, yes/no, on/off) from a flag or the environment."""
    if type(raw) is bool:
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(raw)


KIND_NAMES = {str: "text", int: "whole number", float: "number", flag: "yes/no value (true or false)",
              header_names: "list of header names (the flag repeated, or the variable comma-separated)"}


@dataclass(frozen=True)
class Option:
    name: str  # the flag without dashes, with underscores: the Settings field
    default: Any
    help: str
    kind: Callable[[Any], Any] = str
    repeated: bool = False  # the flag may be given more than once; the variable separates values by commas

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "TOOLMEND_" + self.name.upper()


SERVE_OPTIONS = (
    Option("upstream", "https://api.openai.com/v1", "base URL of the strict upstream (ends with /v1)"),
    Option("host", "127.0.0.1", "address to listen on"),
    Option("port", 8080, "port to listen on", int),
    Option("workers", 1, "worker processes", int),
    Option("profile", "auto", f"provider profile: auto (from the upstream's host), {', '.join(sorted(PROFILES))}"),
    Option("orphan_policy", "synthesize", f"unknown orphan tool results: {', '.join(ORPHAN_POLICIES)}"),
    Option("thinking_policy", "drop", "Anthropic thinking a repaired history needs but memory lacks, or whose signature the upstream "
                                      "refused, and Responses reasoning whose encrypted content the upstream could not verify (drop "
                                      "sends the request without it, a refused one once more; reject refuses, or relays the refusal): "
                                      f"{', '.join(THINKING_POLICIES)}"),
    Option("dummy_signatures", False, "Gemini 3: give a call of the current turn whose thought signature memory does not hold Google's "
                                      "documented dummy (skip_thought_signature_validator) instead of --thinking-policy's text or refusal", flag),
    Option("continue_model_turn", False, "Gemini: a history ending with the model's own text (a prefill) gets a user content asking it "
                                         "to continue, for an upstream that refuses a history ending with a model turn (Code Assist, "
                                         "Antigravity); off: sent as it is", flag),
    Option("memory", "sqlite://$XDG_STATE_HOME/toolmend/memory.db",
           "tool-call memory store URL: sqlite:///path/file.db, redis://host:port/db, rediss://..., memory://"),
    Option("memory_ttl", 86400.0, "seconds a remembered turn is kept", float),
    Option("memory_max_entries", 100_000, "turns the memory keeps at most (the oldest go first)", int),
    Option("upstream_timeout", 600.0, "seconds to wait for the upstream (connect, read, write)", float),
    Option("max_body_bytes", 32 * 1024 * 1024, "largest chat-completions request body accepted", int),
    Option("max_messages", 100_000, "most entries a repaired request's history may hold: messages (Responses: input items), "
                                    "each with its content blocks or parts and tool calls", int),
    Option("max_header_bytes", 64 * 1024, "largest request head (target and header lines) accepted, counted as it arrives", int),
    Option("client_timeout", 60.0, "seconds a client may take to send its request body", float),
    Option("send_timeout", 60.0, "seconds a client may go without taking any of its answer; its connection is then closed, "
                                 "and the upstream request with it", float),
    Option("max_upstream_connections", 512, "concurrent requests to each upstream; more wait, then get 503", int),
    Option("head_timeout", 10.0, "seconds a client may take to send its request line and headers", float),
    Option("max_connections", 1000, "open client connections at most (at the limit, the one longest waiting for its head is closed)", int),
    Option("max_capture_bytes", 16 * 1024 * 1024, "bytes of one upstream answer read for remembering calls; beyond, it is relayed unremembered", int),
    Option("require_client_key", False, "refuse requests that carry no credential at all (401)", flag),
    Option("credential_header", (), "a request header that carries a client's credential, besides every provider's and "
                                    "gateway's (it scopes memory, and counts as one for --require-client-key); repeatable",
           header_names, repeated=True),
    Option("upstream_proxy", None, "outbound HTTP proxy to the upstreams (http://[user:password@]host:port), instead of "
           "HTTPS_PROXY / HTTP_PROXY / ALL_PROXY; none: connect directly. NO_PROXY applies either way"),
    Option("upstream_ca_file", None, "PEM file of the CAs trusted for upstream TLS, instead of SSL_CERT_FILE / SSL_CERT_DIR / certifi's bundle"),
    Option("log_level", "info", f"log level: {', '.join(LOG_LEVELS)}"),
    Option("log_format", "text", f"log format: {', '.join(LOG_FORMATS)}"),
    Option("config", None, "TOML file of routes to more upstreams (path prefix or model pattern) and of named tenants"),
    Option("tenant_scope", "credential", "whose memory a request uses: credential (each its own), or upstream (every client of "
                                         "an upstream shares one: only for single-user deployments)"),
)


@dataclass(frozen=True)
class Settings:
    upstream: str = "https://api.openai.com/v1"
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    profile: str = "auto"
    orphan_policy: OrphanPolicy = "synthesize"  # read as text; _check refuses any other
    thinking_policy: ThinkingPolicy = "drop"  # likewise
    dummy_signatures: bool = False
    continue_model_turn: bool = False
    memory: str = "memory://"
    memory_ttl: float = 86400.0
    memory_max_entries: int = 100_000
    upstream_timeout: float = 600.0
    max_body_bytes: int = 32 * 1024 * 1024
    max_messages: int = 100_000
    max_header_bytes: int = 64 * 1024
    client_timeout: float = 60.0
    send_timeout: float = 60.0
    max_upstream_connections: int = 512
    head_timeout: float = 10.0
    max_connections: int = 1000
    max_capture_bytes: int = 16 * 1024 * 1024
    require_client_key: bool = False
    credential_header: tuple[str, ...] = ()
    upstream_proxy: str | None = field(default=None, repr=False)  # may carry the proxy's password
    upstream_ca_file: str | None = None
    log_level: str = "info"
    log_format: str = "text"
    config: str | None = None
    tenant_scope: str = "credential"
    routes: tuple[RouteSpec, ...] = ()
    tenants: tuple[NamedTenant, ...] = ()
    # Upstream-key mode: only from the environment, never from flags (they show up in `ps`).
    upstream_api_key: str | None = None
    api_keys: frozenset[str] = field(default_factory=frozenset)
    # Which upstreams take an outbound proxy: from --upstream-proxy and the environment's proxy variables.
    egress: Egress = field(default_factory=Egress)

    def __post_init__(self) -> None:
        _check(self)

    @property
    def client_keys(self) -> frozenset[str]:
        """The keys toolmend admits on a route with a key of its own: TOOLMEND_API_KEYS and every tenant's."""
        return self.api_keys.union(*(tenant.keys for tenant in self.tenants))


def load(flags: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> Settings:
    """Settings from parsed flags (None = not given) and the environment."""
    values: dict[str, Any] = {}
    for option in SERVE_OPTIONS:
        raw = flags.get(option.name)
        source = option.flag
        if raw is None and option.env in environ:
            raw, source = environ[option.env], option.env
        if raw is None:
            continue
        try:
            values[option.name] = option.kind(raw)
        except ValueError:
            raise ConfigError(f"{source}={raw!r} is not a valid {KIND_NAMES.get(option.kind, 'value')}: {option.help}") from None
    values.setdefault("memory", default_memory_url(environ))
    if values.get("config"):
        try:
            route_file = load_routes(values["config"], environ)
        except RouteError as exc:
            raise ConfigError(str(exc)) from None
        values["routes"], values["tenants"] = route_file.routes, route_file.tenants
    try:
        values["egress"] = from_environment(environ, values.get("upstream_proxy"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    values["upstream_api_key"] = environ.get("TOOLMEND_UPSTREAM_API_KEY") or None
    values["api_keys"] = key_list(environ.get("TOOLMEND_API_KEYS", ""))
    return Settings(**values)


def _check(s: Settings) -> None:
    parts = urlsplit(s.upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--upstream {s.upstream!r} must be an http(s) URL such as https://api.openai.com/v1")
    if parts.query or parts.fragment:
        raise ConfigError(f"--upstream {s.upstream!r} must not carry a query or fragment")
    if not 0 <= s.port <= 65535:
        raise ConfigError(f"--port {s.port} must be between 0 and 65535")
    if s.workers < 1:
        raise ConfigError(f"--workers {s.workers} must be at least 1")
    if s.profile != "auto" and s.profile not in PROFILES:
        raise ConfigError(f"--profile {s.profile!r} is unknown; choose auto or one of: {', '.join(sorted(PROFILES))}")
    if s.orphan_policy not in ORPHAN_POLICIES:
        raise ConfigError(f"--orphan-policy {s.orphan_policy!r} is unknown; choose one of: {', '.join(ORPHAN_POLICIES)}")
    if s.thinking_policy not in THINKING_POLICIES:
        raise ConfigError(f"--thinking-policy {s.thinking_policy!r} is unknown; choose one of: {', '.join(THINKING_POLICIES)}")
    try:
        check_memory_url(s.memory)
    except ValueError as exc:
        raise ConfigError(f"--memory {redact_memory_url(s.memory)!r} {exc}") from None
    if not (math.isfinite(s.memory_ttl) and s.memory_ttl > 0) or s.memory_max_entries < 1:
        raise ConfigError("--memory-ttl must be a number of seconds > 0 and --memory-max-entries >= 1")
    if not (math.isfinite(s.upstream_timeout) and s.upstream_timeout > 0):
        raise ConfigError(f"--upstream-timeout {s.upstream_timeout} must be > 0 seconds")
    if s.max_body_bytes < 1024:
        raise ConfigError(f"--max-body-bytes {s.max_body_bytes} is too small; use at least 1024")
    if s.max_messages < 1 or s.max_upstream_connections < 1:
        raise ConfigError("--max-messages and --max-upstream-connections must be at least 1")
    if s.max_header_bytes < 1024:
        raise ConfigError(f"--max-header-bytes {s.max_header_bytes} is too small; use at least 1024")
    if not (math.isfinite(s.client_timeout) and s.client_timeout > 0):
        raise ConfigError(f"--client-timeout {s.client_timeout} must be > 0 seconds")
    if not (math.isfinite(s.send_timeout) and s.send_timeout > 0):
        raise ConfigError(f"--send-timeout {s.send_timeout} must be > 0 seconds")
    if not (math.isfinite(s.head_timeout) and s.head_timeout > 0):
        raise ConfigError(f"--head-timeout {s.head_timeout} must be > 0 seconds")
    if s.max_connections < 16:
        raise ConfigError(f"--max-connections {s.max_connections} is too small; use at least 16")
    if s.max_capture_bytes < 64 * 1024:
        raise ConfigError(f"--max-capture-bytes {s.max_capture_bytes} is too small; use at least 65536")
    if s.upstream_ca_file is not None:
        try:
            ssl.create_default_context(cafile=s.upstream_ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"--upstream-ca-file {s.upstream_ca_file!r} cannot be loaded ({exc}); give a PEM file of CA certificates") from None
    if s.log_format not in LOG_FORMATS:
        raise ConfigError(f"--log-format {s.log_format!r} is unknown; choose one of: {', '.join(LOG_FORMATS)}")
    if s.log_level not in LOG_LEVELS:
        raise ConfigError(f"--log-level {s.log_level!r} is unknown; choose one of: {', '.join(LOG_LEVELS)}")
    if s.tenant_scope not in TENANT_SCOPES:
        raise ConfigError(f"--tenant-scope {s.tenant_scope!r} is unknown; choose one of: {', '.join(TENANT_SCOPES)}")
    if s.tenant_scope == "upstream" and s.tenants:
        raise ConfigError("--tenant-scope upstream shares one memory per upstream: [[tenant]] tables in --config would have no effect; "
                          "use one or the other")
    if (s.upstream_api_key or any(route.api_key for route in s.routes)) and not s.client_keys:
        raise ConfigError(
            "an upstream key is set (TOOLMEND_UPSTREAM_API_KEY or a route's api_key_env) but TOOLMEND_API_KEYS is empty and no [[tenant]] "
            "names keys: set TOOLMEND_API_KEYS to the comma-separated keys clients must present, or the proxy would be an open relay for your key"
        )
