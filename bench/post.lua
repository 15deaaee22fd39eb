-- wrk script: POST a request body with the headers an API client sends.
--   wrk -t2 -c32 -d10s --latency -s bench/post.lua http://127.0.0.1:PORT/v1/chat/completions -- bench/request.json
--   wrk ... -s bench/post.lua http://127.0.0.1:PORT/v1/messages -- bench/request_messages.json \
--       'x-api-key: sk-bench' 'anthropic-version: 2023-06-01'
-- The body file is the first script argument (default bench/request.json); any further arguments are
-- headers ("Name: value"), sent instead of the default "Authorization: Bearer sk-bench".
-- done() prints one parseable line:  BENCH_RESULT {json}  (latencies in microseconds).

local body_path = "bench/request.json"

function init(args)
    if args[1] ~= nil and args[1] ~= "" then
        body_path = args[1]
    end
    local f = assert(io.open(body_path, "rb"), "cannot open " .. body_path)
    wrk.body = f:read("*a")
    f:close()
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["Accept"] = "application/json"
    if #args < 2 then
        wrk.headers["Authorization"] = "Bearer sk-bench"
    end
    for i = 2, #args do
        local name, value = args[i]:match("^([^:]+):%s*(.*)$")
        assert(name, "a header argument is 'Name: value', got " .. args[i])
        wrk.headers[name] = value
    end
end

function done(summary, latency, requests)
    local e = summary.errors
    io.write(string.format(
        'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,' ..
        '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,' ..
        '"lat_min_us":%d,"lat_mean_us":%.2f,"lat_max_us":%d,' ..
        '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d}\n',
        summary.requests, summary.duration, summary.bytes,
        e.connect, e.read, e.write, e.status, e.timeout,
        latency.min, latency.mean, latency.max,
        latency:percentile(50), latency:percentile(90), latency:percentile(99),
        latency:percentile(99.9)))
end
