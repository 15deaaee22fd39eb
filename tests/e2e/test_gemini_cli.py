"""The real Gemini CLI (0.61.0, from npm; ``.ci/run`` installs it into ``.venv/clis``) against the scripted strict
Gemini upstream through toolmend under uvicorn, its base URL toolmend's address (``GOOGLE_GEMINI_BASE_URL``), as users
set it: a session that calls a tool twice in parallel (Gemini 3: the first call signed) is accepted, every request
goes upstream as the CLI sent it (nothing to repair), and the signed call content comes back as the upstream emitted it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

from proxy.app import create_app
from proxy.config import Settings
from tests.support.ci import unavailable
from tests.support.gemini_upstream import decoded, make_gemini_upstream
from tests.support.strict_upstream import serve

#: Where .ci/run installs it (``npm install --prefix .venv/clis @google/gemini-cli@0.61.0``); TOOLMEND_GEMINI_CLI overrides.
CLI = Path(os.environ.get("TOOLMEND_GEMINI_CLI", Path(__file__).resolve().parents[2] / ".venv/clis/node_modules/.bin/gemini"))
VERSION = "0.61.0"
PROMPT = "List the files here with a tool, then say done."


def test_gemini_cli_runs_a_tool_loop_through_toolmend(tmp_path, caplog):
    if not CLI.exists():
        unavailable(f"needs Gemini CLI {VERSION} at {CLI} (bash .ci/run installs it with npm)")
    home, work = tmp_path / "home", tmp_path / "work"
    (home / ".gemini").mkdir(parents=True)
    work.mkdir()
    (work / "notes.txt").write_text("x")
    # API-key auth without asking, the temporary folder trusted, nothing sent anywhere but the base URL.
    (home / ".gemini" / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "general": {"disableAutoUpdate": True}, "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False}}))
    app, recorder = make_gemini_upstream(tool=("list_directory", {"dir_path": "."}))
    with serve(app) as upstream, serve(create_app(Settings(upstream=upstream, memory="memory://"))) as toolmend, \
            caplog.at_level(logging.INFO, logger="toolmend.access"):
        env = {"PATH": os.environ["PATH"], "HOME": str(home), "GEMINI_API_KEY": "AIzaLoopbackNotAKey",
               "GOOGLE_GEMINI_BASE_URL": toolmend, "NO_COLOR": "1"}
        run = subprocess.run([str(CLI), "-m", "gemini-3-pro-preview", "-p", PROMPT, "--yolo"], cwd=work, env=env,
                             capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Received 2 function responses." in run.stdout
    assert recorder.rejections == []
    generated = [request for request in recorder.requests if ":streamGenerateContent?alt=sse" in request.path]
    assert len(generated) >= 2 and all(request.path.startswith("/v1beta/models/gemini-3") for request in generated)
    assert all(request.headers["x-goog-api-key"] == "AIzaLoopbackNotAKey" for request in generated)
    # The CLI keeps its history as Gemini asks: toolmend repaired nothing, so the upstream got the CLI's bytes.
    lines = [record.__dict__["request"] for record in caplog.records if "request" in record.__dict__]
    assert lines and not any("repairs" in line for line in lines)
    emitted = recorder.emitted[0]["parts"]
    returned = next(content for content in generated[1].json["contents"] if content["role"] == "model")["parts"]
    calls = [part for part in returned if "functionCall" in part]
    assert [part["functionCall"]["name"] for part in calls] == ["list_directory", "list_directory"]
    assert decoded(calls[0]["thoughtSignature"]) == decoded(next(p for p in emitted if "functionCall" in p)["thoughtSignature"])
