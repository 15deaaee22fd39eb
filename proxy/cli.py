"""The ``toolmend`` command: ``serve`` runs the proxy, ``check`` lints histories offline."""

import argparse
import os
import signal
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from proxy import __version__, logs
from proxy.config import SERVE_OPTIONS, ConfigError, Settings, flag, load
from proxy.dialects.chat.profiles import PROFILES
from proxy.dialects.gemini.profiles import PROFILES as GEMINI_PROFILES
from proxy.metrics import MULTIPROCESS_ENV
from proxy.repair import ORPHAN_POLICIES, Policy
from proxy.repair.findings import THINKING_POLICIES

#: Seconds in-flight requests and streams get to finish after SIGTERM before the server exits.
GRACEFUL_SHUTDOWN_SECONDS = 10


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolmend", description="Repairs tool-call histories for strict LLM providers.")
    parser.add_argument("--version", action="version", version=f"toolmend {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the proxy")
    for option in SERVE_OPTIONS:
        described = f"{option.help} (env {option.env}, default {option.default})"
        if option.kind is flag:  # a switch: present means on; the environment variable takes true/false
            serve.add_argument(option.flag, dest=option.name, action="store_const", const=True, default=None, help=described)
        elif option.repeated:
            serve.add_argument(option.flag, dest=option.name, action="append", default=None, help=described)
        else:
            serve.add_argument(option.flag, dest=option.name, default=None, help=described)

    check = commands.add_parser("check", help="lint Chat Completions, Responses API, Anthropic Messages and Gemini request bodies")
    check.add_argument("file", nargs="?", default="-", help="a request body, a message or input item list, or JSON Lines; - for stdin")
    check.add_argument("--api", choices=("auto", "chat", "responses", "messages", "gemini"), default="auto",
                       help="how to read each document: chat (messages), responses (input), messages (Anthropic), gemini (contents), "
                            "or auto by its shape (input: responses; contents: gemini; Anthropic blocks or a top-level system: messages; "
                            "else chat)")
    check.add_argument("--fix", action="store_true", help="print the repaired JSON instead of the findings")
    check.add_argument("--format", choices=("table", "json"), default="table", help="how to print findings")
    check.add_argument("--policy", choices=ORPHAN_POLICIES, default="synthesize", help="what to do with unknown orphan tool results")
    check.add_argument("--thinking-policy", choices=THINKING_POLICIES, default="drop",
                       help="Anthropic: thinking a repaired final tool turn needs but memory lacks: drop it for the request, or reject; "
                            "Gemini 3: a call without its thought signature: shown as text, or reject")
    check.add_argument("--continue-model-turn", action="store_true",
                       help="Gemini: a history ending with the model's own text gets a user content asking it to continue "
                            "(as --continue-model-turn of serve)")
    check.add_argument("--profile", choices=sorted({*PROFILES, *GEMINI_PROFILES}), default="openai",
                       help="provider profile (Gemini: vertex for Vertex AI)")
    check.add_argument("--list-rules", action="store_true", help="print every repair rule and exit")

    args = parser.parse_args(argv)
    if args.command == "check":
        from proxy import check as checking

        if args.list_rules:
            return checking.list_rules(sys.stdout)
        policy = Policy(orphans=args.policy, thinking=args.thinking_policy, continue_model_turn=args.continue_model_turn)
        return checking.run(args.file, sys.stdin, sys.stdout, checking.Checking(args.fix, args.format, args.profile, policy, args.api))
    try:
        settings = load(vars(args))
    except ConfigError as exc:
        print(f"toolmend: {exc}", file=sys.stderr)
        return 2
    serve_forever(settings)
    return 0


def app_from_environment():
    """The app factory each worker process calls when ``--workers`` > 1 (settings travel in the environment)."""
    from proxy.app import create_app

    settings = load({})
    logs.configure(settings.log_level, settings.log_format)
    return create_app(settings)


def serve_forever(settings: Settings) -> None:
    import uvicorn

    from proxy.app import create_app
    from proxy.server import http_protocol, raise_descriptor_limit

    logs.configure(settings.log_level, settings.log_format)
    raise_descriptor_limit(settings)  # before the workers start: they inherit it
    common: dict[str, Any] = {
        "http": http_protocol(settings),  # the limits on what a client may hold (proxy/server.py)
        "ws": "none",  # no WebSocket routes; an upgraded connection would leave the limits behind
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "log_config": None,  # uvicorn's own lines go through our handler and format too
        "access_log": False,  # toolmend writes its own line per request
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS,
        "server_header": False,
        # Nothing reads the client's address or scheme: no X-Forwarded-* parsing (uvicorn's default) per request.
        "proxy_headers": False,
    }
    if settings.workers == 1:
        app = create_app(settings)
        signal.signal(signal.SIGTERM, _stopped)
        uvicorn.run(app, **common)
        return
    for option in SERVE_OPTIONS:
        value = getattr(settings, option.name)
        if value is not None:
            os.environ[option.env] = ",".join(value) if option.repeated else str(value)
    # Each worker counts in its own files there, and /metrics sums them (prometheus-client multiprocess mode).
    os.environ.setdefault(MULTIPROCESS_ENV, tempfile.mkdtemp(prefix="toolmend-metrics-"))
    uvicorn.run("proxy.cli:app_from_environment", factory=True, workers=settings.workers, **common)


def _stopped(signum: int, frame: object) -> None:
    """SIGTERM is a request to stop, not a failure: exit 0 once it is done. uvicorn drains the requests in flight,
    then sends itself the signal again to end as its default handler would (killed by it, status -15), which an
    orchestrator records as a kill. This handler is the one uvicorn falls back to. (With ``--workers`` the
    supervisor ends with 0 by itself.)"""
    raise SystemExit(0)


if __name__ == "__main__":
    raise SystemExit(main())
