"""One structured line per request, as JSON or as ``key=value`` text.

What a line may hold is fixed here: ids, method, path, statuses, durations, rule codes, re-inserted calls
counted by source, the tenant hash prefix, the profile. Never message content, never credentials: the line
is built only from these fields.
"""

import logging
import re
import time

import orjson

LOG_FORMATS = ("text", "json")
FIELDS = ("request_id", "method", "path", "status", "upstream_status", "duration_ms", "upstream_ms", "first_byte_ms",
          "repairs", "calls", "tenant", "profile", "memory")


class RequestLine:
    """The facts of one request, filled in by whoever knows them, written once at the end."""

    __slots__ = (*FIELDS, "started", "upstream_started")

    def __init__(self, request_id: str, method: str, path: str) -> None:
        for name in FIELDS:
            setattr(self, name, None)
        self.request_id, self.method, self.path = request_id, method, path
        self.started = time.perf_counter()
        self.upstream_started: float | None = None

    def fields(self) -> dict[str, object]:
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": self.formatTime(record), "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        request = getattr(record, "request", None)
        if request is not None:
            line.update(request)
        return orjson.dumps(line).decode()


#: A text-log value made only of these is written as it is; anything else (a space, a quote, a line break,
#: any control or non-ASCII character) is written as a JSON string, so no client-supplied value (a path,
#: say) can end a line or fake a ``key=value`` field.
PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.,:/=+%~@-]+")


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request = getattr(record, "request", None)
        if request is not None:
            text += " " + " ".join(f"{key}={text_value(value)}" for key, value in request.items())
        return text


def text_value(value: object) -> str:
    text = str(value)
    return text if PLAIN_VALUE.fullmatch(text) else orjson.dumps(text).decode()


def configure(level: str, log_format: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
