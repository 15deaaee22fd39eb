"""Memory URLs: which schemes exist, the default one, checking one for the settings, reading its parts, and
hiding its password in logs."""

import os
from collections.abc import Mapping
from urllib.parse import SplitResult, unquote, urlsplit

SCHEMES = ("memory", "sqlite", "redis", "rediss", "redis+cluster", "rediss+cluster")


def default_url(environ: Mapping[str, str]) -> str:
    """What ``toolmend serve`` uses without ``--memory``: a SQLite file in the per-user state directory,
    ``$XDG_STATE_HOME/toolmend/memory.db``, else ``~/.local/state/toolmend/memory.db``."""
    state = environ.get("XDG_STATE_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return "sqlite://" + os.path.join(os.path.abspath(state), "toolmend", "memory.db")


def check_url(url: str) -> None:
    """Raise ``ValueError`` with one line saying what is wrong with a memory URL and how to write it."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"is not a URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"is not supported; use one of: {', '.join(s + '://' for s in SCHEMES)}")
    if parts.scheme == "sqlite":
        if parts.query or parts.fragment:
            raise ValueError("must not carry a query or fragment; write sqlite:///path/to/memory.db")
        path = sqlite_path(url)
        if not path or path.endswith("/"):
            raise ValueError("needs a file path, e.g. sqlite:///var/lib/toolmend/memory.db")
        if path == ":memory:":
            raise ValueError("is private to one connection; use memory:// for an in-process store")
    elif parts.scheme.startswith("redis"):
        _check_redis(parts)


def _check_redis(parts: SplitResult) -> None:
    cluster = parts.scheme.endswith("+cluster")
    example = _redis_example(parts)
    redis_nodes(parts)  # raises for a node without a host or with a bad port
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"names database {db!r}: the path must be a database number, e.g. {example}")
    if cluster and db not in ("", "0"):
        raise ValueError(f"names database {db}: a Redis Cluster has only database 0; write it like {example}")


def _redis_example(parts: SplitResult) -> str:
    cluster = parts.scheme.endswith("+cluster")
    return f"{parts.scheme}://127.0.0.1:7000,127.0.0.1:7001" if cluster else f"{parts.scheme}://127.0.0.1:6379/0"


def redis_nodes(parts: SplitResult) -> list[tuple[str, int | None]]:
    """``(host, port)`` of each address of a Redis URL (``redis+cluster://`` names several, comma-separated),
    each parsed alone (``urlsplit`` reads the whole list as one host). ValueError for an address without a
    host (a client would dial localhost instead) or with a bad port."""
    example = _redis_example(parts)
    nodes: list[tuple[str, int | None]] = []
    for address in parts.netloc.rpartition("@")[2].split(","):
        parsed = urlsplit("//" + address)
        if not parsed.hostname:
            raise ValueError(f"needs a host, e.g. {example}")
        try:
            nodes.append((parsed.hostname, parsed.port))
        except ValueError:  # .port raises on one that is not a number in 0..65535
            raise ValueError(f"has a bad port; write it like {example}") from None
    return nodes


def sqlite_path(url: str) -> str:
    """``sqlite:///abs/file.db`` -> ``/abs/file.db``; ``sqlite://relative.db`` -> ``relative.db``; ``~`` expands."""
    rest = url.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0]
    path = unquote(rest)
    return os.path.expanduser(path) if path.startswith("~") else path


def redact(url: str) -> str:
    """The URL with any password replaced, fit for logs and error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
    except ValueError:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return parts._replace(netloc=f"{user}:***@{netloc[1]}").geturl()
