"""The observing layer: request ids, one log line per request, request metrics; and the log formats."""

import json
import logging
import uuid

import httpx
from starlette.responses import PlainTextResponse

from proxy.dialects import DIALECTS
from proxy.logs import JsonFormatter, TextFormatter
from proxy.metrics import Metrics
from proxy.observe import Observer, fresh_id, line_of
from proxy.protocols import Protocols


def app_with(metrics: Metrics) -> Observer:
    async def app(scope, receive, send):
        line = line_of(scope)
        line.repairs, line.tenant = "TM101=1", "abcd1234"
        await PlainTextResponse("ok", status_code=201)(scope, receive, send)

    return Observer(app, metrics, Protocols(DIALECTS))


async def call(app, headers=None) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        return await client.post("/v1/chat/completions?key=secret", content=b"{}", headers=headers or {})


async def test_request_id_is_echoed_or_generated(caplog) -> None:
    app = app_with(Metrics())
    given = await call(app, {"x-request-id": "req-42"})
    assert given.headers["x-toolmend-request-id"] == "req-42"
    generated = await call(app, {"x-request-id": "x" * 500})  # not a sane id: replaced
    assert len(generated.headers["x-toolmend-request-id"]) == 32


async def test_one_line_per_request_with_the_handlers_facts_and_no_query(caplog) -> None:
    caplog.set_level(logging.INFO, logger="toolmend.access")
    await call(app_with(Metrics()), {"x-request-id": "req-7", "authorization": "Bearer sk-secret"})
    (record,) = [r for r in caplog.records if r.name == "toolmend.access"]
    fields = record.request
    assert fields["request_id"] == "req-7" and fields["status"] == 201 and fields["repairs"] == "TM101=1"
    assert fields["path"] == "/v1/chat/completions" and fields["tenant"] == "abcd1234"
    assert "secret" not in JsonFormatter().format(record) and "secret" not in TextFormatter().format(record)


async def test_requests_are_counted_by_route_and_status() -> None:
    metrics = Metrics()
    await call(app_with(metrics))
    await call(app_with(metrics))
    text = metrics.render()[0].decode()
    assert 'toolmend_requests_total{route="chat",status="201"} 2.0' in text
    assert "toolmend_in_flight_requests 0.0" in text


def test_json_format_is_one_json_object_per_line() -> None:
    record = logging.LogRecord("toolmend.access", logging.INFO, __file__, 1, "request", None, None)
    record.request = {"request_id": "r", "status": 200}
    line = JsonFormatter().format(record)
    assert "\n" not in line and json.loads(line)["request_id"] == "r"
    assert TextFormatter().format(record).endswith("request request_id=r status=200")


def test_both_formats_stamp_each_line_as_loggings_default_does() -> None:
    """The stamp is made once a second (TextFormatter and JsonFormatter cache it): every line still gets its own
    second and milliseconds."""
    default, text, json_format = logging.Formatter(), TextFormatter(), JsonFormatter()
    for created in (1_764_650_000.004, 1_764_650_000.999, 1_764_650_001.0, 1_764_650_001.5, 1_764_649_999.25):
        record = logging.LogRecord("toolmend", logging.INFO, __file__, 1, "request", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        stamp = default.formatTime(record)
        assert text.format(record).startswith(f"{stamp} INFO toolmend request")
        assert json.loads(json_format.format(record))["time"] == stamp


def test_text_values_of_every_type_keep_the_line_whole() -> None:
    record = logging.LogRecord("toolmend", logging.INFO, __file__, 1, "request", None, None)
    record.request = {"status": 200, "duration_ms": 1.5e-05, "path": "/v1/a b\nfake=1", "memory": True}
    assert TextFormatter().format(record).endswith('status=200 duration_ms=1.5e-05 path="/v1/a b\\nfake=1" memory=True')


def test_a_fresh_request_id_is_a_version_4_uuid_in_hex() -> None:
    ids = {fresh_id() for _ in range(200)}
    assert len(ids) == 200
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and parsed.version == 4 and parsed.variant == uuid.RFC_4122
