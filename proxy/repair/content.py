"""Reading message content that arrives as a string, a list of parts, an object or null; and what the rules of
every dialect write into content alike."""

from typing import Any

import orjson

#: The key under which argument text that is no JSON object is kept, verbatim (chat's TM203, TM309; Messages' TM503).
UNPARSED_KEY = "_toolmend_unparsed_arguments"

#: The user turn put in front of a history that may not open with the model's turn (chat's TM308, Messages' TM515).
OPENING_TEXT = "(earlier conversation omitted)"


def is_text_part(part: Any) -> bool:
    return type(part) is str or (type(part) is dict and part.get("type") == "text" and type(part.get("text")) is str)


def is_media_part(part: Any) -> bool:
    """A typed part that is not text (image_url, input_audio, file ...): only user messages may carry it."""
    return type(part) is dict and type(part.get("type")) is str and part["type"] != "text"


def part_text(part: Any) -> str:
    if type(part) is str:
        return part
    if is_text_part(part):
        return part["text"]
    return orjson.dumps(part).decode()


def as_text(content: Any) -> str:
    """Content as one string: parts joined with newlines, objects as JSON text, null as ``""``."""
    if type(content) is str:
        return content
    if content is None:
        return ""
    if type(content) is list:
        return "\n".join(part_text(part) for part in content)
    return orjson.dumps(content).decode()


def as_parts(content: Any) -> list[Any]:
    """Content as a list of parts: a string becomes one text part."""
    return content if type(content) is list else [{"type": "text", "text": as_text(content)}]
