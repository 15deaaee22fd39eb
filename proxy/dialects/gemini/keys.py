"""What a Gemini call is remembered and recalled by: the one key function capture and repair share.

A ``functionCall`` (``{name, args, id?}``) carries an ``id`` on some endpoints and models only (GN-9), and a client
may drop it (Vertex refused ids until 2026-09). So a remembered model content is stored under every key of each of
its calls (``stored_keys``: the ``id`` when it has one, and always its digest), and a call in a request is recalled by
one key (``call_key``: its ``id`` when it has one, else its digest).

The digest is of the call's name and canonical arguments (sorted keys, an integral float written as the integer a
JavaScript client sends back): ``gemini-call:`` and 32 hex digits of SHA-256. Two calls alike in name and arguments
share it, and the latest remembered wins; Gemini validates the thought signatures of the current turn only (since
the last user message that is not function responses), which is the latest, so that is the one a repair needs.

A remembered Gemini turn (``proxy.turns.Turn``, dialect ``gemini``) is one ``model`` content of an answer, whose
parts include a ``functionCall``: ``parts`` holds every part in order exactly as the upstream sent it
(``thoughtSignature`` on the part it came on, thought parts, text), ``ids`` is ``turn_ids(parts)``.

Responses carry no arguments, so an orphan ``functionResponse`` is recalled by its ``id`` only (``response_key``);
one without an id has no key (the orphan policy answers it).
"""

import hashlib
from collections.abc import Iterable
from typing import Any

import orjson

#: Prefix of a digest key: never a Gemini id, and tells the key apart in a store shared by every dialect.
DIGEST_PREFIX = "gemini-call:"
#: Hex digits of the SHA-256 a digest key keeps (128 bits).
DIGEST_HEX = 32


def _canonical(value: Any) -> Any:
    """``value`` with every integral float as an int (``1.0`` and ``1`` are one argument once a client re-encodes it)."""
    kind = type(value)
    if kind is float and value.is_integer():
        return int(value)
    if kind is dict:
        return {key: _canonical(item) for key, item in value.items()}
    if kind is list:
        return [_canonical(item) for item in value]
    return value


def digest_key(name: str, args: Any) -> str | None:
    """The digest key of a call of ``name`` with ``args`` (absent or null: ``{}``); None for arguments nested too deep
    to encode (such a call is refused upstream anyway)."""
    try:
        text = orjson.dumps(_canonical({} if args is None else args), option=orjson.OPT_SORT_KEYS)
    except (orjson.JSONEncodeError, RecursionError):
        return None
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass") + b"\x1f" + text).hexdigest()
    return DIGEST_PREFIX + digest[:DIGEST_HEX]


def _id_of(value: Any) -> str | None:
    key = value.get("id") if type(value) is dict else None
    return key if type(key) is str and key else None


def call_key(call: Any) -> str | None:
    """What a ``functionCall`` object in a request is recalled by: its ``id``, else its digest; None for a call
    without a name."""
    if (key := _id_of(call)) is not None:
        return key
    name = call.get("name") if type(call) is dict else None
    return digest_key(name, call.get("args")) if type(name) is str and name else None


def stored_keys(call: Any) -> list[str]:
    """Every key a remembered ``functionCall`` is stored under: its ``id`` (when it has one), then its digest."""
    keys: list[str] = []
    if (key := _id_of(call)) is not None:
        keys.append(key)
    name = call.get("name") if type(call) is dict else None
    if type(name) is str and name and (digest := digest_key(name, call.get("args"))) is not None:
        keys.append(digest)
    return keys


def response_key(response: Any) -> str | None:
    """What an orphan ``functionResponse`` object recalls its call by: its ``id``; None without one."""
    return _id_of(response)


def turn_ids(parts: Iterable[Any]) -> list[str]:
    """The ``ids`` of a remembered turn made of ``parts``: every stored key of each ``functionCall``, in order, once."""
    keys: dict[str, None] = {}
    for part in parts:
        call = part.get("functionCall") if type(part) is dict else None
        if type(call) is dict:
            keys.update(dict.fromkeys(stored_keys(call)))
    return list(keys)
