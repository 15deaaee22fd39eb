-- Fixed-answer mock of POST /v1/chat/completions (loaded by nginx.conf.template).
-- Every answer is built once, when the module is loaded; a request only reads its body,
-- looks for "stream": true and writes the canned bytes.
local M = {}

local ID = "chatcmpl-BnchMock7c2d4e6f8a0b1c3d5e7f9a"
local CREATED = "1764500000"
local MODEL = "gpt-4o-mini-2024-07-18"
local FP = "fp_0ba0d124f1"
local CALL_ID = "call_Qx7Lm2Np4Rt6Vw8Yz0Ab1Cd3"
local FN = "get_weather"
local ARGS = '{"location": "Lisbon, Portugal", "unit": "celsius", "days": 3}'

local function jstr(s)
    -- JSON string literal for the few characters the canned text contains.
    s = s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n')
    return '"' .. s .. '"'
end

-- Non-streaming answer: one assistant message with one tool call (~600 bytes).
local body = table.concat({
    '{"id":"', ID, '","object":"chat.completion","created":', CREATED,
    ',"model":"', MODEL, '","choices":[{"index":0,"message":{"role":"assistant","content":null,',
    '"tool_calls":[{"id":"', CALL_ID, '","type":"function","function":{"name":"', FN,
    '","arguments":', jstr(ARGS), '}}],"refusal":null},',
    '"logprobs":null,"finish_reason":"tool_calls"}],',
    '"usage":{"prompt_tokens":742,"completion_tokens":31,"total_tokens":773,',
    '"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"', FP, '"}',
})
M.body = body
M.body_len = tostring(#body)

-- Streaming answer: 20 chat.completion.chunk events (the role and the call's id and name,
-- 18 pieces of its arguments, the finish) and then [DONE]; each is flushed on its own.
local head = '{"id":"' .. ID .. '","object":"chat.completion.chunk","created":' .. CREATED ..
    ',"model":"' .. MODEL .. '","service_tier":"default","system_fingerprint":"' .. FP ..
    '","choices":[{"index":0,"delta":'
local NPIECES = 18
local events = {}
events[1] = 'data: ' .. head ..
    '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"' .. CALL_ID ..
    '","type":"function","function":{"name":"' .. FN .. '","arguments":""}}],"refusal":null}' ..
    ',"logprobs":null,"finish_reason":null}]}\n\n'
for i = 1, NPIECES do
    local piece = ARGS:sub(math.floor((i - 1) * #ARGS / NPIECES) + 1, math.floor(i * #ARGS / NPIECES))
    events[#events + 1] = 'data: ' .. head ..
        '{"tool_calls":[{"index":0,"function":{"arguments":' .. jstr(piece) .. '}}]}' ..
        ',"logprobs":null,"finish_reason":null}]}\n\n'
end
events[#events + 1] = 'data: ' .. head .. '{},"logprobs":null,"finish_reason":"tool_calls"}]}\n\n'
events[#events + 1] = 'data: [DONE]\n\n'
M.events = events

local function read_body()
    ngx.req.read_body()
    local data = ngx.req.get_body_data()
    if data == nil then
        local path = ngx.req.get_body_file()
        if path then
            local f = io.open(path, "rb")
            if f then
                data = f:read("*a")
                f:close()
            end
        end
    end
    return data or ""
end

function M.chat_completions()
    local req = read_body()
    if ngx.re.find(req, [["stream"\s*:\s*true]], "jo") then
        ngx.status = 200
        ngx.header["Content-Type"] = "text/event-stream; charset=utf-8"
        ngx.header["Cache-Control"] = "no-cache"
        for i = 1, #events do
            ngx.print(events[i])
            ngx.flush(true)
        end
        return
    end
    ngx.status = 200
    ngx.header["Content-Type"] = "application/json"
    ngx.header["Content-Length"] = M.body_len
    ngx.print(body)
end

return M
