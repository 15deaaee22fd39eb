"""One structured line per request, as JSON or as ``key=value`` text.

What a line may hold is fixed here: ids, method, path, statuses, durations, rule codes, re-inserted calls
counted by source, the tenant hash prefix, the profile. Never message content, never credentials: the line
is built only from these fields.

``log_request`` writes it: through ``logging`` like any other record, or, when the one handler the record would
reach is ``configure``'s own and nothing filters it, straight to that handler's stream as the same text (every
request writes one; a ``LogRecord`` and the general formatting were a tenth of a request's work).
"""

import dataclasses
import functools
import logging
import operator
import re
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

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
_logged_values = operator.attrgetter(*FIELDS)


class _Stamped(logging.Formatter):
    """``formatTime`` as logging's default (``2026-12-02 03:43:56,074``, local time), the part before the
    milliseconds made once a second rather than once a line: every request writes a line. ``request_line`` is the
    text ``format`` gives a request's record (``log_request``), made from its parts."""

    _second: int | None = None
    _stamp = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, record.msecs)

    def stamp(self, created: float, msecs: float) -> str:
        second = int(created)
        if second != self._second:
            self._second, self._stamp = second, time.strftime(self.default_time_format, self.converter(created))
        return f"{self._stamp},{int(msecs):03d}"  # logging's default_msec_format, "%s,%03d"

    def request_values(self, stamp: str, level: str, logger: str, values: tuple[object, ...]) -> str:
        return self.request_line(stamp, level, logger, zip(FIELDS, values, strict=True))

    def request_line(self, stamp: str, level: str, logger: str, fields: Iterable[tuple[str, object]]) -> str:
        """The line ``format`` writes for a request's record: made at ``stamp``, ``fields`` its ``request`` (None: left
        out, as ``RequestLine.fields`` leaves it)."""
        raise NotImplementedError


class JsonFormatter(_Stamped):
    def format(self, record: logging.LogRecord) -> str:
        line = {"time": self.formatTime(record), "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        request = getattr(record, "request", None)
        if request is not None:
            line.update(request)
        return orjson.dumps(line).decode()

    def request_line(self, stamp: str, level: str, logger: str, fields: Iterable[tuple[str, object]]) -> str:
        line: dict[str, object] = {"time": stamp, "level": level.lower(), "logger": logger, "message": "request"}
        line.update((key, value) for key, value in fields if value is not None)
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
            text += " " + text_fields(request.items())
        return text

    def request_line(self, stamp: str, level: str, logger: str, fields: Iterable[tuple[str, object]]) -> str:
        return f"{stamp} {level} {logger} request {text_fields(fields)}"

    def request_values(self, stamp: str, level: str, logger: str, values: tuple[object, ...]) -> str:
        """``request_line`` of a RequestLine's logged ``values`` (in FIELDS' order): where every value set is a plain
        value of a type a template knows (``_template``), written by that template in one step."""
        template = _template(tuple(map(type, values)))
        if template is not None:
            text, present, strings = template
            chosen = strings(values)
            # Every string plain (and not empty) when all of them joined are: one match instead of one a field.
            if all(chosen) and PLAIN_VALUE.fullmatch("".join(chosen)):
                return f"{stamp} {level} {logger} request {text % present(values)}"
        return self.request_line(stamp, level, logger, zip(FIELDS, values, strict=True))


#: Types whose ``str`` is always a plain value: digits, ".", "-", "e", "inf", "nan".
_PLAIN_TYPES = frozenset((int, float))


def text_fields(fields: Iterable[tuple[str, object]]) -> str:
    """``key=value`` pairs, each value as ``text_value`` writes it; a field whose value is None is left out."""
    plain = PLAIN_VALUE.fullmatch
    return " ".join([f"{key}={value if type(value) in _PLAIN_TYPES or (type(value) is str and plain(value)) else text_value(value)}"
                     for key, value in fields if value is not None])


@functools.lru_cache(maxsize=64)
def _template(types: tuple[type, ...]) -> tuple[str, Callable[[tuple], Any], Callable[[tuple], Any]] | None:
    """For logged values of these types: the ``%`` template of the line's fields that are set, what takes their values
    and what takes the strings among them; None unless every value is a str, an int, a float or None (``%s`` writes
    each as ``text_fields`` does when the strings are plain), with a string among them."""
    if not set(types) <= {str, int, float, type(None)}:
        return None
    present = [index for index, kind in enumerate(types) if kind is not type(None)]
    strings = [index for index in present if types[index] is str]
    if not strings:
        return None
    # One index: itemgetter answers the value itself, which ``%`` and the string test above take as well.
    return " ".join(f"{FIELDS[index]}=%s" for index in present), operator.itemgetter(*present), operator.itemgetter(*strings)


def text_value(value: object) -> str:
    text = str(value)
    return text if PLAIN_VALUE.fullmatch(text) else orjson.dumps(text).decode()


class LineHandler(logging.StreamHandler):
    """``configure``'s handler: a ``StreamHandler`` that also writes a request's line without a ``LogRecord``."""

    def write_request(self, level: int, logger: str, line: RequestLine) -> None:
        """What ``emit`` writes for the record ``logger.log(level, "request", extra={"request": line.fields()})``."""
        formatter = cast(_Stamped, self.formatter)
        created = time.time()
        values = _logged_values(line)
        self.acquire()
        try:
            # The milliseconds as LogRecord takes them from its creation time.
            text = formatter.request_values(formatter.stamp(created, (created - int(created)) * 1000), logging.getLevelName(level),
                                            logger, values)
            self.stream.write(text + self.terminator)
            self.stream.flush()
        except RecursionError:  # as emit
            raise
        except Exception:  # noqa: BLE001 - as emit: a failed write is the handler's to report, never the request's
            record = logging.LogRecord(logger, level, "", 0, "request", None, None)
            record.request = line.fields()
            self.handleError(record)
        finally:
            self.release()


#: The formatters whose ``request_line`` is their ``format`` of a request's record.
LINE_FORMATTERS = (TextFormatter, JsonFormatter)


def log_request(logger: logging.Logger, level: int, line: RequestLine) -> None:
    """``logger.log(level, "request", extra={"request": line.fields()})``: through ``logging``, or, when the one handler
    the record would reach is ``configure``'s ``LineHandler`` with one of its formatters and no filter on the logger or
    the handler, written by that handler directly, the same text."""
    if not logger.isEnabledFor(level):
        return
    handler = _sole_handler(logger, level)
    if handler is None:
        logger.log(level, "request", extra={"request": line.fields()})
    else:
        handler.write_request(level, logger.name, line)


def _sole_handler(logger: logging.Logger, level: int) -> LineHandler | None:
    """The ``LineHandler`` that would emit a record of ``logger`` at ``level`` when no other handler would see it and no
    filter could stop or change it (``Logger.callHandlers``'s walk); else None."""
    if logger.filters:
        return None
    found = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if found is not None:
                return None
            found = handler
        current = current.parent if current.propagate else None
    if type(found) is not LineHandler or found.filters or level < found.level or type(found.formatter) not in LINE_FORMATTERS:
        return None
    return found


def configure(level: str, log_format: str) -> None:
    # Neither format writes where a call was made from, nor the thread or process: not looking them up for every
    # record is the logging HOWTO's own advice ("Optimization"), and a third of what a request line cost.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = LineHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
