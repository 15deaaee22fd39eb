"""The request line written straight by ``configure``'s handler is the line ``logging`` would write for its record."""

import io
import logging
import time

import pytest

from proxy import logs
from proxy.logs import RequestLine, log_request


@pytest.fixture
def configured():
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    stream = io.StringIO()
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def _line(path: str = "/v1/a b\nfake=1") -> RequestLine:
    return RequestLine("req-1", "POST", path, status=200, duration_ms=1.5e-05, upstream_ms=12.345,
                       repairs="TM101=1", tenant="abcd1234", profile="openai")


LINES = [_line(), _line("/v1/chat/completions"), _line(""), RequestLine("r", "GET", "/v1/x", status=True)]  # type: ignore[arg-type]


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("log_format", logs.LOG_FORMATS)
def test_the_direct_line_is_the_formatters_line(configured, log_format, line, monkeypatch) -> None:
    logs.configure("info", log_format)
    handler = logging.getLogger().handlers[0]
    handler.setStream(configured)
    monkeypatch.setattr(time, "time", lambda: 1_764_650_000.25)
    log_request(logging.getLogger("toolmend.access"), logging.INFO, line)
    record = logging.LogRecord("toolmend.access", logging.INFO, __file__, 1, "request", None, None)
    record.created, record.msecs = 1_764_650_000.25, 250.0
    record.request = line.fields()
    assert configured.getvalue() == handler.format(record) + "\n"


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_another_handler_gets_the_record_through_logging(configured) -> None:
    logs.configure("info", "text")
    logging.getLogger().handlers[0].setStream(configured)
    kept = _Kept()
    access = logging.getLogger("toolmend.access")
    access.addHandler(kept)
    try:
        log_request(access, logging.INFO, _line())
    finally:
        access.removeHandler(kept)
    (record,) = kept.records
    assert record.request == _line().fields()
    assert configured.getvalue().count("request_id=req-1") == 1  # configure's handler wrote it once, as a handler


def test_a_level_below_the_loggers_writes_nothing(configured) -> None:
    logs.configure("info", "text")
    logging.getLogger().handlers[0].setStream(configured)
    log_request(logging.getLogger("toolmend.access"), logging.DEBUG, _line())
    assert configured.getvalue() == ""
