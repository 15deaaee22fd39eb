-- Fixed-answer mock of the three repaired endpoints (loaded by nginx.conf.template):
--   POST /v1/chat/completions  Chat Completions: one tool call
--   POST /v1/responses         the OpenAI Responses API: a reasoning item (encrypted_content) and a function_call
--   POST /v1/messages          Anthropic Messages: a signed thinking block and a tool_use
--   POST /v1beta/models/{model}:generateContent, :streamGenerateContent (also below /v1, where a proxy whose upstream
--                              ends with /v1 sends them): Gemini, a thought summary and a signed functionCall
-- Every answer is built once, when the module is loaded; a request only reads its body, looks for
-- "stream": true and writes the canned bytes: the JSON answer with a Content-Length, or the SSE
-- events, each flushed as its own HTTP chunk.
local M = {}

local CREATED = "1764500000"
local FN = "get_weather"
local ARGS = '{"location": "Lisbon, Portugal", "unit": "celsius", "days": 3}'
local NPIECES = 18 -- argument pieces of a streamed call (chat and Responses); Messages: see below

local function jstr(s)
    -- JSON string literal for the few characters the canned text contains.
    s = s:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', '\\n')
    return '"' .. s .. '"'
end

local function pieces(s, n)
    -- s cut into n consecutive pieces of about the same length.
    local out = {}
    for i = 1, n do
        out[i] = s:sub(math.floor((i - 1) * #s / n) + 1, math.floor(i * #s / n))
    end
    return out
end

local function opaque(n, seed)
    -- n characters of base64 that look random (Park-Miller; exact in doubles): an encrypted_content blob, a signature.
    local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    local out, x = {}, seed
    for i = 1, n do
        x = (x * 16807) % 2147483647
        local k = math.floor(x / 256) % 64 + 1
        out[i] = alphabet:sub(k, k)
    end
    return table.concat(out)
end

-- ----------------------------------------------------------------------------- Chat Completions

local CHAT_ID = "chatcmpl-BnchMock7c2d4e6f8a0b1c3d5e7f9a"
local CHAT_MODEL = "gpt-4o-mini-2024-07-18"
local FP = "fp_0ba0d124f1"
local CALL_ID = "call_Qx7Lm2Np4Rt6Vw8Yz0Ab1Cd3"

-- Non-streaming answer: one assistant message with one tool call (~600 bytes).
local chat_json = table.concat({
    '{"id":"', CHAT_ID, '","object":"chat.completion","created":', CREATED,
    ',"model":"', CHAT_MODEL, '","choices":[{"index":0,"message":{"role":"assistant","content":null,',
    '"tool_calls":[{"id":"', CALL_ID, '","type":"function","function":{"name":"', FN,
    '","arguments":', jstr(ARGS), '}}],"refusal":null},',
    '"logprobs":null,"finish_reason":"tool_calls"}],',
    '"usage":{"prompt_tokens":742,"completion_tokens":31,"total_tokens":773,',
    '"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"', FP, '"}',
})

-- Streaming answer: 20 chat.completion.chunk events (the role and the call's id and name,
-- 18 pieces of its arguments, the finish) and then [DONE].
local head = '{"id":"' .. CHAT_ID .. '","object":"chat.completion.chunk","created":' .. CREATED ..
    ',"model":"' .. CHAT_MODEL .. '","service_tier":"default","system_fingerprint":"' .. FP ..
    '","choices":[{"index":0,"delta":'
local chat_events = {}
chat_events[1] = 'data: ' .. head ..
    '{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"' .. CALL_ID ..
    '","type":"function","function":{"name":"' .. FN .. '","arguments":""}}],"refusal":null}' ..
    ',"logprobs":null,"finish_reason":null}]}\n\n'
for _, piece in ipairs(pieces(ARGS, NPIECES)) do
    chat_events[#chat_events + 1] = 'data: ' .. head ..
        '{"tool_calls":[{"index":0,"function":{"arguments":' .. jstr(piece) .. '}}]}' ..
        ',"logprobs":null,"finish_reason":null}]}\n\n'
end
chat_events[#chat_events + 1] = 'data: ' .. head .. '{},"logprobs":null,"finish_reason":"tool_calls"}]}\n\n'
chat_events[#chat_events + 1] = 'data: [DONE]\n\n'

-- ----------------------------------------------------------------------------- Responses API

local RESP_ID = "resp_0b5c3e9a1f7d2846c0e8a4b6d1f3e5a7c9b2d4f6e8a0c1d3"
local RS_ID = "rs_0b5c3e9a1f7d2846c0e8a4b6d1f3e5a7c9b2d4f6e8a0c1d4"
local FC_ID = "fc_0b5c3e9a1f7d2846c0e8a4b6d1f3e5a7c9b2d4f6e8a0c1d5"
local RESP_CALL_ID = "call_Hn3Ws8Kd1Qz5Tb7Xm2Vr4Jc6"
local RESP_MODEL = "o4-mini-2025-04-16"
local ENCRYPTED = "gAAAAABp" .. opaque(96, 7)

local reasoning_done = '{"id":"' .. RS_ID .. '","type":"reasoning","encrypted_content":"' .. ENCRYPTED ..
    '","summary":[]}'
local reasoning_added = '{"id":"' .. RS_ID .. '","type":"reasoning","summary":[]}'
local function function_call(status, arguments)
    return '{"id":"' .. FC_ID .. '","type":"function_call","status":"' .. status .. '","arguments":' ..
        jstr(arguments) .. ',"call_id":"' .. RESP_CALL_ID .. '","name":"' .. FN .. '"}'
end

local function response(status, output, usage)
    return table.concat({
        '{"id":"', RESP_ID, '","object":"response","created_at":', CREATED, ',"status":"', status,
        '","background":false,"error":null,"incomplete_details":null,"instructions":null,',
        '"max_output_tokens":null,"model":"', RESP_MODEL, '","output":[', output, '],',
        '"parallel_tool_calls":true,"previous_response_id":null,',
        '"reasoning":{"effort":"medium","summary":null},"store":true,"temperature":1.0,',
        '"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[],',
        '"top_p":1.0,"truncation":"disabled","usage":', usage, ',"user":null,"metadata":{}}',
    })
end

local RESP_USAGE = '{"input_tokens":1046,"input_tokens_details":{"cached_tokens":0},"output_tokens":87,' ..
    '"output_tokens_details":{"reasoning_tokens":64},"total_tokens":1133}'
local final_response = response("completed", reasoning_done .. "," .. function_call("completed", ARGS), RESP_USAGE)
local opening_response = response("in_progress", "", "null")

-- Streaming answer, as OpenAI sends it (an event: line and a sequence_number in each): created,
-- in_progress, the reasoning item added and done, the call added, 18 argument deltas, the
-- arguments done, the call done, completed (26 events).
local responses_events = {}
local function revent(kind, fields)
    local n = #responses_events
    responses_events[n + 1] = 'event: ' .. kind .. '\ndata: {"type":"' .. kind .. '",' .. fields ..
        ',"sequence_number":' .. n .. '}\n\n'
end
local AT_CALL = '"item_id":"' .. FC_ID .. '","output_index":1'
revent("response.created", '"response":' .. opening_response)
revent("response.in_progress", '"response":' .. opening_response)
revent("response.output_item.added", '"output_index":0,"item":' .. reasoning_added)
revent("response.output_item.done", '"output_index":0,"item":' .. reasoning_done)
revent("response.output_item.added", '"output_index":1,"item":' .. function_call("in_progress", ""))
for i, piece in ipairs(pieces(ARGS, NPIECES)) do
    revent("response.function_call_arguments.delta",
        AT_CALL .. ',"delta":' .. jstr(piece) .. ',"obfuscation":"' .. opaque(10 + i % 5, i) .. '"')
end
revent("response.function_call_arguments.done", AT_CALL .. ',"arguments":' .. jstr(ARGS))
revent("response.output_item.done", '"output_index":1,"item":' .. function_call("completed", ARGS))
revent("response.completed", '"response":' .. final_response)

-- ----------------------------------------------------------------------------- Anthropic Messages

local MSG_ID = "msg_01Bnch7c2d4e6f8a0b1c3d5e7f"
local MSG_MODEL = "claude-sonnet-4-5-20250929"
local TOOLU_ID = "toolu_01Xq7Lm2Np4Rt6Vw8Yz0Ab1C"
local THINKING = "The user wants the Lisbon forecast for a long weekend from the 12th. " ..
    "get_weather takes a location and a number of days: Lisbon, Portugal, celsius, three days."
local SIGNATURE = "Eq" .. opaque(340, 11) .. "=="
local INPUT = ARGS -- the tool_use input, as JSON text
local MSG_USAGE_IN = '"input_tokens":1012,"cache_creation_input_tokens":0,"cache_read_input_tokens":0'
local OUTPUT_TOKENS = "96"

local thinking_block = '{"type":"thinking","thinking":' .. jstr(THINKING) .. ',"signature":"' .. SIGNATURE .. '"}'
local tool_use_block = '{"type":"tool_use","id":"' .. TOOLU_ID .. '","name":"' .. FN .. '","input":' .. INPUT .. '}'
local function message(content, stop_reason, usage)
    return '{"id":"' .. MSG_ID .. '","type":"message","role":"assistant","model":"' .. MSG_MODEL ..
        '","content":[' .. content .. '],"stop_reason":' .. stop_reason .. ',"stop_sequence":null,"usage":' .. usage .. '}'
end
local messages_json = message(thinking_block .. "," .. tool_use_block, '"tool_use"',
    '{' .. MSG_USAGE_IN .. ',"output_tokens":' .. OUTPUT_TOKENS .. ',"service_tier":"standard"}')

-- Streaming answer, as Claude sends it: message_start, the thinking block (start, ping, 6 thinking
-- deltas, the signature delta, stop), the tool_use block (start, an empty input_json_delta and 10
-- pieces of the input, stop), message_delta, message_stop (26 events, 18 of them deltas).
local messages_events = {}
local function mevent(kind, data)
    messages_events[#messages_events + 1] = 'event: ' .. kind .. '\ndata: ' .. data .. '\n\n'
end
local function delta(index, d)
    mevent("content_block_delta", '{"type":"content_block_delta","index":' .. index .. ',"delta":' .. d .. '}')
end
mevent("message_start", '{"type":"message_start","message":' ..
    message("", "null", '{' .. MSG_USAGE_IN .. ',"output_tokens":1,"service_tier":"standard"}') .. '}')
mevent("content_block_start", '{"type":"content_block_start","index":0,"content_block":' ..
    '{"type":"thinking","thinking":"","signature":""}}')
mevent("ping", '{"type":"ping"}')
for _, piece in ipairs(pieces(THINKING, 6)) do
    delta(0, '{"type":"thinking_delta","thinking":' .. jstr(piece) .. '}')
end
delta(0, '{"type":"signature_delta","signature":"' .. SIGNATURE .. '"}')
mevent("content_block_stop", '{"type":"content_block_stop","index":0}')
mevent("content_block_start", '{"type":"content_block_start","index":1,"content_block":' ..
    '{"type":"tool_use","id":"' .. TOOLU_ID .. '","name":"' .. FN .. '","input":{}}}')
delta(1, '{"type":"input_json_delta","partial_json":""}')
for _, piece in ipairs(pieces(INPUT, 10)) do
    delta(1, '{"type":"input_json_delta","partial_json":' .. jstr(piece) .. '}')
end
mevent("content_block_stop", '{"type":"content_block_stop","index":1}')
mevent("message_delta", '{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},' ..
    '"usage":{"output_tokens":' .. OUTPUT_TOKENS .. '}}')
mevent("message_stop", '{"type":"message_stop"}')

-- ----------------------------------------------------------------------------- Gemini (native API)

local GEM_MODEL = "gemini-3-pro-preview"
local GEM_CALL_ID = "bnchgem7c2d4e6f8"
local GEM_SIGNATURE = "Cq" .. opaque(338, 23) .. "=="
local GEM_USAGE = '"usageMetadata":{"promptTokenCount":742,"candidatesTokenCount":31,"totalTokenCount":837,' ..
    '"thoughtsTokenCount":64}'
local gemini_call = '{"functionCall":{"id":"' .. GEM_CALL_ID .. '","name":"' .. FN .. '","args":' .. ARGS ..
    '},"thoughtSignature":"' .. GEM_SIGNATURE .. '"}'
local function gemini_response(parts, finished)
    return '{"candidates":[{"content":{"role":"model","parts":[' .. parts .. ']},' ..
        (finished and '"finishReason":"STOP",' or '') .. '"index":0}],' .. GEM_USAGE ..
        ',"modelVersion":"' .. GEM_MODEL .. '","responseId":"bnchGemResp7c2d4e6f"}'
end
local gemini_json = gemini_response('{"text":' .. jstr(THINKING) .. ',"thought":true},' .. gemini_call, true)

-- Streaming answer (?alt=sse), as Gemini sends it: the thought summary in 19 text deltas, then the signed call with
-- the finish reason (20 events, no terminal event).
local gemini_events = {}
for _, piece in ipairs(pieces(THINKING, 19)) do
    gemini_events[#gemini_events + 1] = 'data: ' .. gemini_response('{"text":' .. jstr(piece) .. ',"thought":true}', false) ..
        '\r\n\r\n'
end
gemini_events[#gemini_events + 1] = 'data: ' .. gemini_response(gemini_call, true) .. '\r\n\r\n'

-- ----------------------------------------------------------------------------- serving

M.answers = {
    chat = { json = chat_json, events = chat_events },
    responses = { json = final_response, events = responses_events },
    messages = { json = messages_json, events = messages_events },
    gemini = { json = gemini_json, events = gemini_events },
}
for _, answer in pairs(M.answers) do
    answer.json_len = tostring(#answer.json)
end

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

-- Answer a request of one protocol ("chat", "responses", "messages" or "gemini": Gemini says by its path, the others by
-- "stream": true in the body, whether to stream).
function M.serve(protocol)
    local answer = M.answers[protocol]
    local req = read_body()
    ngx.status = 200
    local streamed
    if protocol == "gemini" then
        streamed = ngx.re.find(ngx.var.uri, [[:streamGenerateContent$]], "jo")
    else
        streamed = ngx.re.find(req, [["stream"\s*:\s*true]], "jo")
    end
    if streamed then
        ngx.header["Content-Type"] = "text/event-stream; charset=utf-8"
        ngx.header["Cache-Control"] = "no-cache"
        local events = answer.events
        for i = 1, #events do
            ngx.print(events[i])
            ngx.flush(true)
        end
        return
    end
    ngx.header["Content-Type"] = "application/json"
    ngx.header["Content-Length"] = answer.json_len
    ngx.print(answer.json)
end

return M
