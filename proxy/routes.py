"""Routes: one proxy in front of several upstreams.

A small TOML file (``--config``) maps a path prefix or a model-name pattern to an upstream, a profile
and optionally the environment variable holding that upstream's key. The single ``--upstream`` stays
the default route::

    [[route]]
    prefix = "/mistral"                       # /mistral/v1/chat/completions -> https://api.mistral.ai/v1/chat/completions
    upstream = "https://api.mistral.ai/v1"
    api_key_env = "MISTRAL_API_KEY"           # optional: toolmend sends this key upstream (clients need TOOLMEND_API_KEYS)

    [[route]]
    model = "deepseek-*"                      # chat completions whose "model" matches (shell-style pattern)
    upstream = "https://api.deepseek.com/v1"
    profile = "deepseek"                      # optional: else picked from the upstream's host

A prefix route wins over a model route; the first matching model route wins; otherwise the default
(``proxy/router.py`` decides).

The file may also name tenants, so that memory survives key rotation (``proxy/tenant.py``)::

    [[tenant]]
    name = "team-a"                           # memory belongs to the name, whichever of its keys a client presents
    keys_env = "TEAM_A_KEYS"                  # comma-separated toolmend keys: client keys too, like TOOLMEND_API_KEYS

Keys never live in the file, only the names of the variables that hold them; a key belongs to one tenant.
"""

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from proxy.credentials import key_list
from proxy.dialects.chat.profiles import PROFILES
from proxy.tenant import NamedTenant

PREFIX = re.compile(r"/[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*")
KEYS = frozenset(("prefix", "model", "upstream", "profile", "api_key_env"))
# A tenant's name shows in start-up logs and goes into its id's hash: plain, and never a secret.
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
TENANT_KEYS = frozenset(("name", "keys_env"))


class RouteError(ValueError):
    """A route file that cannot work; the message says where and why."""


@dataclass(frozen=True)
class RouteSpec:
    upstream: str
    profile: str = "auto"
    prefix: str | None = None
    model: str | None = None
    api_key: str | None = None


@dataclass(frozen=True)
class RouteFile:
    routes: tuple[RouteSpec, ...]
    tenants: tuple[NamedTenant, ...]


def load_routes(path: str, environ: Mapping[str, str] = os.environ) -> RouteFile:
    try:
        with open(path, "rb") as file:
            document = tomllib.load(file)
    except OSError as exc:
        raise RouteError(f"--config {path}: cannot read it ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise RouteError(f"--config {path}: not valid TOML ({exc})") from None
    routes, tenants = document.get("route", []), document.get("tenant", [])
    if set(document) - {"route", "tenant"} or type(routes) is not list or type(tenants) is not list:
        raise RouteError(f"--config {path}: expected only [[route]] and [[tenant]] tables")
    named: list[NamedTenant] = []
    for number, entry in enumerate(tenants, 1):
        named.append(_tenant(path, number, entry, environ, named))
    return RouteFile(tuple(_route(path, number, entry, environ) for number, entry in enumerate(routes, 1)), tuple(named))


def _table(where: str, entry: object, allowed: frozenset[str]) -> dict[str, Any]:
    """A [[route]] or [[tenant]] entry: a table holding only the keys its kind allows."""
    if type(entry) is not dict:
        raise RouteError(f"{where}: must be a table")
    unknown = set(entry) - allowed
    if unknown:
        raise RouteError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    return entry


def _route(path: str, number: int, entry: object, environ: Mapping[str, str]) -> RouteSpec:
    where = f"--config {path}: route {number}"
    entry = _table(where, entry, KEYS)
    upstream = entry.get("upstream")
    not_a_url = f"{where}: 'upstream' must be an http(s) URL such as https://api.mistral.ai/v1"
    if type(upstream) is not str:
        raise RouteError(not_a_url)
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RouteError(not_a_url)
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise RouteError(f"{where}: 'upstream' must not carry a query, fragment or user name; keys go in api_key_env")
    prefix, model = entry.get("prefix"), entry.get("model")
    if (prefix is None) == (model is None):
        raise RouteError(f"{where}: give exactly one of 'prefix' (a path such as \"/mistral\") or 'model' (a pattern such as \"mistral-*\")")
    if prefix is not None and (type(prefix) is not str or not PREFIX.fullmatch(prefix) or prefix.startswith("/v1")):
        raise RouteError(f"{where}: 'prefix' must be a path such as \"/mistral\", not under /v1")
    if model is not None and (type(model) is not str or not model):
        raise RouteError(f"{where}: 'model' must be a non-empty pattern such as \"mistral-*\"")
    profile = entry.get("profile", "auto")
    if profile != "auto" and profile not in PROFILES:
        raise RouteError(f"{where}: unknown profile {profile!r}; choose auto or one of {', '.join(sorted(PROFILES))}")
    api_key = None
    if "api_key_env" in entry:
        api_key = environ.get(entry["api_key_env"]) if type(entry["api_key_env"]) is str else None
        if not api_key:
            raise RouteError(f"{where}: api_key_env names {entry['api_key_env']!r}, which is not set in the environment")
    return RouteSpec(upstream=upstream, profile=profile, prefix=prefix, model=model, api_key=api_key)


def _tenant(path: str, number: int, entry: object, environ: Mapping[str, str], earlier: list[NamedTenant]) -> NamedTenant:
    where = f"--config {path}: tenant {number}"
    entry = _table(where, entry, TENANT_KEYS)
    name = entry.get("name")
    if type(name) is not str or not TENANT_NAME.fullmatch(name):
        raise RouteError(f"{where}: 'name' must be up to 64 letters, digits, '.', '_' or '-', such as \"team-a\"")
    where = f"{where} ({name!r})"
    if any(tenant.name == name for tenant in earlier):
        raise RouteError(f"{where}: another tenant has this name; give each its own")
    variable = entry.get("keys_env")
    if type(variable) is not str or not variable:
        raise RouteError(f"{where}: 'keys_env' must name the environment variable holding the tenant's comma-separated keys")
    keys = key_list(environ.get(variable, ""))
    if not keys:
        raise RouteError(f"{where}: keys_env names {variable!r}, which is not set or holds no keys")
    for tenant in earlier:
        if keys & tenant.keys:  # which key is never said: errors are logged
            raise RouteError(f"{where}: a key in {variable} is also a key of tenant {tenant.name!r}; a key belongs to one tenant")
    return NamedTenant(name, keys)
