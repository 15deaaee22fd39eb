r"""Record the request bodies real agent CLIs send, for ``tests/fixtures/clis/`` (run by hand, not by the suite).

A small loopback server speaks the three protocols and answers each CLI's first request with a tool call, so the
CLI runs the tool and sends the history back; every POST body is written to ``OUT/<cli>-<n>-<path>.json`` exactly
as it arrived. The answers carry the shapes the fixtures exist for:

* Claude Code (Anthropic Messages, ``ANTHROPIC_BASE_URL``): a ``thinking`` block with empty text and a
  signature (``thinking.display: "omitted"``, the current models' default) before the ``tool_use``;
* Codex (Responses, a provider with ``wire_api = "responses"``): a ``reasoning`` item with ``encrypted_content``
  and the server's ``rs_``/``fc_`` ids before the call (Codex sends ``store: false``);
* Qwen Code (Chat Completions, ``OPENAI_BASE_URL``): a plain tool call, whose result it sends back as text parts.

The versions the fixtures were captured with (their packages ask for node 22; node 20 runs them with a warning),
installed, then run::

    npm install --prefix /tmp/clis @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @qwen-code/qwen-code@0.24.0
    .venv/bin/python -m tests.support.cli_capture --clis /tmp/clis --out /tmp/captured

The fixtures are each session's third request (two tool results in its history), copied through ``--scrub``, which
replaces what names the machine or the run (the temporary directory, the host, the kernel, Claude Code's device id)
in place, every other byte staying the CLI's::

    python -m tests.support.cli_capture --scrub /tmp/captured/claude-code-03-v1_messages.json tests/fixtures/clis/claude-code-adaptive.json

and likewise ``claude-code-enabled-03-v1_messages.json`` (``claude-code-enabled.json``), ``codex-03-v1_responses.json``
(``codex.json``), ``qwen-code-03-v1_chat_completions.json`` (``qwen-code.json``). No real key or host is used: the
CLIs get a dummy key and talk to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SIGNATURE = "RXFBQUFBQUFCQ0Rmb3JnZWQtaW4tYS10ZXN0LXNpZ25hdHVyZQ=="  # what a loopback server signs with: no real one
ENCRYPTED = "gAAAAABtoolmend-loopback-encrypted-content=="
KEY = "sk-loopback-not-a-key"
PROMPT = "List the files here with a tool, then say done."


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


# ---------------------------------------------------------------------------------------------- Anthropic Messages


def _messages_answer(body: dict[str, Any], turn: int) -> bytes:
    """A tool call (with signed empty thinking) while the history holds fewer than two results, else text."""
    results = sum(1 for message in body.get("messages", []) if isinstance(message.get("content"), list)
                  for block in message["content"] if isinstance(block, dict) and block.get("type") == "tool_result")
    tools = [tool.get("name") for tool in body.get("tools", []) if isinstance(tool, dict)]
    blocks: list[dict[str, Any]] = []
    if body.get("thinking", {}).get("type") in ("enabled", "adaptive"):
        blocks.append({"type": "thinking", "thinking": "", "signature": SIGNATURE})
    if results < 2 and tools:
        name = next((n for n in ("Glob", "LS", "Bash", "Read") if n in tools), tools[0])
        arguments = {"Glob": {"pattern": "*"}, "Bash": {"command": "ls", "description": "List files"}, "Read": {"file_path": "notes.txt"}}
        blocks.append({"type": "tool_use", "id": f"toolu_loop{turn:02d}", "name": name, "input": arguments.get(name, {})})
        stop = "tool_use"
    else:
        blocks.append({"type": "text", "text": "done"})
        stop = "end_turn"
    message = {"id": f"msg_loop{turn:02d}", "type": "message", "role": "assistant", "model": body.get("model"), "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}
    events: list[tuple[str | None, dict[str, Any] | str]] = [("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            start, deltas = {"type": "thinking", "thinking": "", "signature": ""}, [{"type": "signature_delta", "signature": SIGNATURE}]
        elif block["type"] == "tool_use":
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": json.dumps(block["input"])}]
        else:
            start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}) for delta in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}))
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events)


# ------------------------------------------------------------------------------------------------------ Responses


def _shell_call(tools: list[Any]) -> tuple[str, str]:
    """A harmless listing with the shell tool the request offers (its name changes between Codex versions)."""
    names = [tool.get("name") for tool in tools if isinstance(tool, dict) and tool.get("type") == "function"]
    for name, arguments in (("exec_command", {"cmd": "ls"}), ("shell_command", {"command": "ls"}), ("shell", {"command": ["ls"]})):
        if name in names:
            return name, json.dumps(arguments)
    return (names[0] if names else "shell"), "{}"


def _responses_answer(body: dict[str, Any], turn: int) -> bytes:
    outputs = sum(1 for item in body.get("input", []) if isinstance(item, dict) and item.get("type", "").endswith("_output"))
    items: list[dict[str, Any]] = [{"type": "reasoning", "id": f"rs_loop{turn:02d}", "summary": [], "encrypted_content": ENCRYPTED}]
    if outputs < 2 and body.get("tools"):
        name, arguments = _shell_call(body["tools"])
        items.append({"type": "function_call", "id": f"fc_loop{turn:02d}", "call_id": f"call_loop{turn:02d}", "name": name,
                      "arguments": arguments, "status": "completed"})
    else:
        items.append({"type": "message", "id": f"msg_loop{turn:02d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": "done", "annotations": []}]})
    response = {"id": f"resp_loop{turn:02d}", "object": "response", "status": "in_progress", "model": body.get("model"), "output": []}
    events: list[tuple[str | None, dict[str, Any] | str]] = [("response.created", {"type": "response.created", "response": response})]
    for index, item in enumerate(items):
        events.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": index, "item": item}))
        events.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": index, "item": item}))
    done = {**response, "status": "completed", "output": items,
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 1}}}
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return _sse(events)


# ----------------------------------------------------------------------------------------------- Chat Completions


def _chat_answer(body: dict[str, Any], turn: int) -> bytes:
    results = sum(1 for message in body.get("messages", []) if isinstance(message, dict) and message.get("role") == "tool")
    names = [tool.get("function", {}).get("name") for tool in body.get("tools", []) if isinstance(tool, dict)]
    chunk = {"id": f"chatcmpl-loop{turn:02d}", "object": "chat.completion.chunk", "created": 1, "model": body.get("model")}
    if results < 2 and names:
        name = next((n for n in ("list_directory", "glob", "read_file") if n in names), names[0])
        arguments = {"list_directory": {"path": "."}, "glob": {"pattern": "*"}}.get(name, {})
        call = {"index": 0, "id": f"call_loop{turn:02d}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        deltas = [{"role": "assistant", "content": None, "tool_calls": [call]}]
        finish = "tool_calls"
    else:
        deltas, finish = [{"role": "assistant", "content": "done"}], "stop"
    events: list[tuple[str | None, dict[str, Any] | str]] = [
        (None, {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}) for delta in deltas]
    events.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}))
    events.append((None, "[DONE]"))
    return _sse(events)


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    out: Path
    cli: str
    count = 0
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"[{self.cli}] {self.command} {self.path}\n")

    def do_GET(self) -> None:
        self._json(200, {"object": "list", "data": []})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        with self.lock:
            type(self).count += 1
            turn = type(self).count
        path = self.path.split("?")[0]
        (self.out / f"{self.cli}-{turn:02d}-{path.strip('/').replace('/', '_')}.json").write_bytes(raw)
        body = json.loads(raw)
        if path.endswith("/count_tokens"):
            return self._json(200, {"input_tokens": 10})
        if path.endswith("/messages"):
            answer = _messages_answer(body, turn)
        elif path.endswith("/responses"):
            answer = _responses_answer(body, turn)
        elif path.endswith("/chat/completions"):
            answer = _chat_answer(body, turn)
        else:
            return self._json(404, {"error": {"message": "not here"}})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def _json(self, status: int, value: Any) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def _serve(cli: str, out: Path) -> Iterator[str]:
    handler = type(f"Recorder_{cli}", (_Recorder,), {"out": out, "cli": cli, "count": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _commands(clis: Path, base: str, home: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    bin_ = clis / "node_modules" / ".bin"
    codex_provider = (f'model_providers.loop={{name="loop", base_url="{base}/v1", wire_api="responses", env_key="LOOP_API_KEY"}}')
    claude = [str(bin_ / "claude"), "-p", PROMPT, "--output-format", "json", "--tools", "Glob", "--allowedTools", "Glob",
              "--system-prompt", "You are a terse assistant."]
    claude_env = {"ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": KEY, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                  "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}
    return {
        "claude-code": (claude, claude_env),
        # An older model that takes manual thinking (``thinking.type: "enabled"`` with a budget) rather than adaptive.
        "claude-code-enabled": ([*claude, "--model", "claude-sonnet-4-5"], {**claude_env, "MAX_THINKING_TOKENS": "2048"}),
        "codex": ([str(bin_ / "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox",
                   "-c", "model_provider=loop", "-c", codex_provider, "-m", "gpt-5.1-codex", PROMPT],
                  {"LOOP_API_KEY": KEY, "CODEX_HOME": str(home / ".codex")}),
        "qwen-code": ([str(bin_ / "qwen"), "-p", PROMPT, "--auth-type", "openai", "--safe-mode",
                       "--system-prompt", "You are a terse assistant."],
                      {"OPENAI_BASE_URL": f"{base}/v1", "OPENAI_API_KEY": KEY, "OPENAI_MODEL": "qwen3-coder-plus"}),
    }


def capture(clis: Path, out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for cli in only:
        with tempfile.TemporaryDirectory(prefix="cli-capture-") as scratch:
            home, work = Path(scratch) / "home", Path(scratch) / "project"
            (home / ".codex").mkdir(parents=True)
            work.mkdir()
            (work / "notes.txt").write_text("hello\n")
            with _serve(cli, out) as base:
                argv, extra = _commands(clis, base, home)[cli]
                env = {"PATH": os.environ["PATH"], "HOME": str(home), "TERM": "dumb", "NO_COLOR": "1", **extra}
                done = subprocess.run(argv, cwd=work, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=180, check=False)
                sys.stderr.write(f"[{cli}] exit {done.returncode}\n{done.stdout.decode()[-2000:]}\n{done.stderr.decode()[-2000:]}\n")


def scrub(source: Path, target: Path) -> None:
    """Copy a captured body with what names this machine or run replaced, in place: every other byte is the CLI's."""
    raw = source.read_bytes()
    for pattern, fixed in ((rb"cli-capture-[a-z0-9_]{8}", b"cli-capture-xxxxxxxx"), (re.escape(socket.gethostname().encode()), b"host"),
                           (rb"Linux [0-9][0-9.]*-[A-Za-z0-9.-]+", b"Linux 6.1.0"), (rb'device_id\\":\\"[0-9a-f]+', rb'device_id\\":\\"0')):
        raw = re.sub(pattern, fixed, raw)
    target.write_bytes(raw)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clis", type=Path, default=Path("/tmp/clis"))
    parser.add_argument("--out", type=Path, default=Path("/tmp/captured"))
    parser.add_argument("--only", nargs="*", default=["claude-code", "claude-code-enabled", "codex", "qwen-code"])
    parser.add_argument("--scrub", nargs=2, type=Path, metavar=("CAPTURED", "FIXTURE"))
    args = parser.parse_args()
    if args.scrub:
        scrub(*args.scrub)
        return
    if shutil.which("node") is None:
        sys.exit("node is needed to run the CLIs")
    capture(args.clis, args.out, args.only)


if __name__ == "__main__":
    main()
