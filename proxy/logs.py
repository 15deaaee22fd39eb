"""One structured line per request, as JSON or as ``key=value`` text.

What a line may hold is fixed here: ids, method, path, statuses, durations, rule codes, re-inserted calls
counted by source, the tenant hash prefix, the profile. Never message content, never credentials: the line
is built only from these fields.
"""

import dataclasses
import logging
import re
import time

import orjson

LOG_FORMATS = ("text", "json")


@dataclasses.dataclass(slots=True, eq=False)
class RequestLine:
    """The facts of one request, filled in by whoever knows them, written once at the end.

    Every field but the two clocks is logged, in this order, when it is set.
    """

    request_id: str
    method: str
    path: str
    status: int | None = None
    upstream_status: int | None = None
    duration_ms: float | None = None
    upstream_ms: float | None = None
    first_byte_ms: float | None = None
    repairs: str | None = None
    calls: str | None = None
    tenant: str | None = None
    profile: str | None = None
    memory: str | None = None
    # perf_counter readings the durations are measured from; not facts to log.
    started: float = dataclasses.field(default_factory=time.perf_counter, metadata={"logged": False})
    upstream_started: float | None = dataclasses.field(default=None, metadata={"logged": False})

    def fields(self) -> dict[str, object]:
        return {name: value for name in FIELDS if (value := getattr(self, name)) is not None}


FIELDS = tuple(f.name for f in dataclasses.fields(RequestLine) if f.metadata.get("logged", True))


class _Stamped(logging.Formatter):
    """``formatTime`` as logging's default (``2026-12-02 03:43:56,074``, local time), the part before the
    milliseconds made once a second rather than once a line: every request writes a line."""

    _second: int | None = None
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second = int(record.created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime(self.default_time_format, self.converter(record.created))
        return f"{self._stamp},{int(record.msecs):03d}"  # logging's default_msec_format, "%s,%03d"


class JsonFormatter(_Stamped):
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


class TextFormatter(_Stamped):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        request = getattr(record, "request", None)
        if request is not None:
            text += " " + " ".join([f"{key}={value if type(value) in _PLAIN_TYPES else text_value(value)}" for key, value in request.items()])
        return text


#: Types whose ``str`` is always a plain value: digits, ".", "-", "e", "inf", "nan".
_PLAIN_TYPES = frozenset((int, float))


def text_value(value: object) -> str:
    text = str(value)
    return text if PLAIN_VALUE.fullmatch(text) else orjson.dumps(text).decode()


def configure(level: str, log_format: str) -> None:
    # Neither format writes where a call was made from, nor the thread or process: not looking them up for every
    # record is the logging HOWTO's own advice ("Optimization"), and a third of what a request line cost.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
