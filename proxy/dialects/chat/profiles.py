"""What each provider additionally needs of a Chat Completions history, on top of chat's rules for everyone (section 3.2 of docs/provider-rules.md).

Providers contradict each other (Mistral wants 9-character ids, DeepSeek wants ``reasoning_content`` that
Groq rejects, Ollama rejects the ``null`` content that Anthropic-backed routes require), so these rules
cannot all run for everyone. A profile is a named, ordered set of extra rules (chat's pipeline names the profiles
each runs for), and what selects it when no profile is given (``auto``): the upstream's host, else, for an upstream
whose host names none (a gateway, a local server), the model each request asks for. Every dialect reads its own
profile by the name chosen here (``Dialect.profile``), so this module is the one owner of that choice.
"""

import fnmatch
import re
import sys
from urllib.parse import urlsplit

from proxy.dialects.chat.rules import PIPELINE
from proxy.repair.profile import Profile, ProfileRule


def _own(name: str) -> tuple[ProfileRule, ...]:
    """The rules chat's pipeline runs for the profile ``name`` alone (``rules/__init__.py`` says which, in what order)."""
    return PIPELINE.profile_rules(name)


def _keys(*names: str) -> frozenset[str]:
    return frozenset(names)


TOOL_CALL_KEYS = {"tool_call": _keys("id", "type", "function"), "function": _keys("name", "arguments")}

# mistral_common's request models (extra=forbid): MI-7, MI-8.
MISTRAL_SCHEMA = {
    "system": _keys("role", "content"),
    "user": _keys("role", "content"),
    "assistant": _keys("role", "content", "tool_calls", "prefix"),
    "tool": _keys("role", "content", "tool_call_id", "name"),
    **TOOL_CALL_KEYS,
}

# The OpenAI message schema, which Groq, Cerebras and Fireworks enforce closed: GR-1, CE-1, FW-1.
OPENAI_SCHEMA = {
    "system": _keys("role", "content", "name"),
    "developer": _keys("role", "content", "name"),
    "user": _keys("role", "content", "name"),
    "assistant": _keys("role", "content", "name", "tool_calls", "refusal", "audio"),
    "tool": _keys("role", "content", "tool_call_id", "name"),
    **TOOL_CALL_KEYS,
}

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile("openai", "OpenAI and Azure OpenAI: the universal rules only",
                hosts=("api.openai.com", "openai.azure.com", "cognitiveservices.azure.com")),
        Profile("mistral", "Mistral API and mistral_common servers: 9-character ids, a bridge after tool results, closed schema",
                _own("mistral"), MISTRAL_SCHEMA, ("api.mistral.ai",), string_tool_content=True,
                models=("mistral-*", "magistral-*", "codestral-*", "devstral-*", "ministral-*", "pixtral-*", "open-mistral-*", "open-mixtral-*")),
        Profile("deepseek", "DeepSeek (and Kimi) thinking mode: reasoning_content on every tool-call turn",
                _own("deepseek"), hosts=("api.deepseek.com", "api.moonshot.ai", "api.moonshot.cn"),
                models=("deepseek-*", "kimi-*", "moonshot-*")),
        Profile("anthropic", "OpenAI-compatible routes to Claude: null instead of empty text, no stray keys in tool calls",
                _own("anthropic"), TOOL_CALL_KEYS, ("api.anthropic.com",), models=("claude-*",)),
        # No length on call ids (E-ID-40 is OpenAI's and Azure's): LiteLLM in front of Gemini carries each call's
        # thought signature in its id (``call_<id>__thought__<signature>``), which a shortened id would lose.
        Profile("gemini", "Gemini's OpenAI-compatible layer: thought signatures restored, content never null, a user turn first",
                _own("gemini"), hosts=("generativelanguage.googleapis.com",),
                models=("gemini-*",), max_id_length=sys.maxsize),
        Profile("openrouter", "OpenRouter: a Gemini 3 model's reasoning_details restored on the current turn's call turns",
                _own("openrouter"), hosts=("openrouter.ai",)),
        Profile("ollama", "Ollama's /v1: content never null", _own("ollama"), hosts=("localhost:11434", "127.0.0.1:11434")),
        Profile("xai", "xAI: tool-only assistant content \"\" instead of null or []", _own("xai"), hosts=("api.x.ai",),
                models=("grok-*",)),
        Profile("groq", "Groq, Cerebras, Fireworks: the OpenAI schema, closed (no reasoning fields, no stray keys)",
                _own("groq"), OPENAI_SCHEMA, ("api.groq.com", "api.cerebras.ai", "api.fireworks.ai"), string_tool_content=True),
        Profile("vllm", "vLLM, SGLang, TGI: arguments always a JSON object, content key always present, one system message first",
                _own("vllm"), string_tool_content=True),
        Profile("zai", "Z.AI (Zhipu GLM): the universal rules only (its Anthropic endpoint: system messages folded)",
                hosts=("api.z.ai", "open.bigmodel.cn"), models=("glm-*",)),
    )
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of: {', '.join(sorted(PROFILES))}") from None


def host_profile(upstream: str) -> Profile | None:
    """The profile an upstream URL's host (or host:port) selects; None for a host no profile names."""
    parts = urlsplit(upstream)
    host = (parts.hostname or "").lower()
    candidates = {host, f"{host}:{parts.port}"} if parts.port else {host}
    for profile in PROFILES.values():
        if any(h in candidates or host.endswith("." + h) for h in profile.hosts):
            return profile
    return None


def route_profile(upstream: str, configured: str) -> tuple[Profile, bool]:
    """A route's profile for its configured name (``auto``: the one its upstream's host selects), and whether each
    request's model selects the profile instead (``auto``, and a host no profile names; ``model_profile``)."""
    if configured != "auto":
        return get_profile(configured), False
    host = host_profile(upstream)
    return host or PROFILES["openai"], host is None


#: Each profile's model patterns as one expression (a request to an unknown host asks every time).
_BY_MODEL = tuple((profile, re.compile("|".join(map(fnmatch.translate, profile.models)))) for profile in PROFILES.values() if profile.models)


def model_profile(model: object) -> Profile | None:
    """The profile a request's model names: a bare name (``deepseek-v4-pro``, ``claude-opus-4-8``), matched without
    regard to case. None for any other: a name with an ``org/`` prefix is a model served by someone else (an
    aggregator, a self-hosted server), whose rules the name does not tell."""
    if type(model) is not str or "/" in model:
        return None
    if model in _MODELS_SEEN:
        return _MODELS_SEEN[model]
    name = model.lower()
    found = next((profile for profile, pattern in _BY_MODEL if pattern.match(name)), None)
    if len(_MODELS_SEEN) >= MODELS_REMEMBERED:
        _MODELS_SEEN.clear()  # clients choose the names: what is kept stays bounded
    _MODELS_SEEN[model] = found
    return found


#: How many model names ``model_profile`` keeps its answer for: a deployment sees a handful, asked on every request.
MODELS_REMEMBERED = 1024
_MODELS_SEEN: dict[str, Profile | None] = {}
