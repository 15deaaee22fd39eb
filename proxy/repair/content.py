"""Reading message content that arrives as a string, a list of parts, an object or null."""

from typing import Any

import orjson


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
