"""The real Claude Code CLI (pinned in ``tests/clients/package.json``), run against a base URL.

``make clients`` (``npm ci --prefix tests/clients``) installs it. Run as a script, this module
records what the CLI sends to the scripted upstream and saves it, redacted, as the fixtures under
``tests/fixtures/clients/claude_code_<version>/`` that unit tests replay without npm::

    .venv/bin/python -m tests.clients.claude_code
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLIENTS = Path(__file__).resolve().parent
CLAUDE = CLIENTS / "node_modules" / ".bin" / "claude"
VERSION = json.loads((CLIENTS / "package.json").read_text())["dependencies"]["@anthropic-ai/claude-code"]
FIXTURES = CLIENTS.parent / "fixtures" / "clients" / f"claude_code_{VERSION}"
MODEL = "claude-sonnet-4-5"
PROMPT = "Write the line 'hello from ctxweb' into result.txt in the working directory."
CONTENT = "hello from ctxweb\n"


def installed() -> bool:
    return shutil.which("node") is not None and CLAUDE.exists()


@dataclass
class Run:
    returncode: int
    events: list[dict[str, Any]]  # the stream-json lines
    stderr: str
    workdir: Path
    home: Path

    def transcripts(self) -> list[Path]:
        """The JSONL transcripts Claude Code wrote under $HOME/.claude/projects/."""
        return sorted((self.home / ".claude" / "projects").glob("*/*.jsonl"))

    def result(self) -> dict[str, Any]:
        return next((e for e in reversed(self.events) if e.get("type") == "result"), {})


def claude_env(base_url: str, api_key: str, home: Path, ctxweb_key: str | None = None) -> dict[str, str]:
    """No traffic but to ``base_url``: no telemetry, updates or side requests; a HOME of its own. A
    ``ctxweb_key`` goes in a header of its own (docs/PROXY.md), the upstream's key stays the API key."""
    headers = {"ANTHROPIC_CUSTOM_HEADERS": f"ctxweb-api-key: {ctxweb_key}"} if ctxweb_key else {}
    return {
        **headers,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "IS_SANDBOX": "1",  # --dangerously-skip-permissions as root
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": api_key,
    }


def run_claude(
    base_url: str,
    api_key: str,
    workdir: Path,
    home: Path,
    *,
    ctxweb_key: str | None = None,
    timeout: float = 90,
    prompt: str = PROMPT,
    resume: bool = False,
    mcp_servers: Mapping[str, Any] | None = None,
) -> Run:
    """One ``claude -p`` run; ``resume``: it continues the latest conversation (``--continue``);
    ``mcp_servers``: the MCP servers it is given (``--mcp-config``, as a ``.mcp.json`` names them)."""
    mcp: list[str] = []
    if mcp_servers is not None:
        config = home / "mcp.json"
        config.write_text(json.dumps({"mcpServers": dict(mcp_servers)}))
        mcp = ["--mcp-config", str(config), "--strict-mcp-config"]
    out = subprocess.run(
        [str(CLAUDE), "-p", prompt, *(["--continue"] if resume else []), "--output-format", "stream-json",
         "--verbose", "--model", MODEL, "--dangerously-skip-permissions", *mcp],
        cwd=workdir, env=claude_env(base_url, api_key, home, ctxweb_key), capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return Run(out.returncode, events, out.stderr, workdir, home)


_SECRET_HEADERS = ("x-api-key", "authorization", "host", "content-length")


def redact(request: Mapping[str, Any], root: str) -> dict[str, Any]:
    """A recorded request as a fixture: its headers (credentials and host out) and its body, with the
    run's temp directory (``root``, also as Claude Code spells it in a project's name) and the ids of
    this machine and run replaced by stable placeholders."""
    body = json.dumps(request["body"], ensure_ascii=False)
    body = body.replace(root, "/work").replace(root.replace("/", "-").replace(".", "-").replace("_", "-"), "-work")
    body = re.sub(r'\\"device_id\\":\\"[0-9a-f]+\\"', r'\\"device_id\\":\\"DEVICE\\"', body)
    session = request["headers"].get("x-claude-code-session-id", "")
    if session:
        body = body.replace(session, "00000000-0000-4000-8000-000000000000")
    headers = {k: v for k, v in request["headers"].items() if k not in _SECRET_HEADERS}
    if session:
        headers["x-claude-code-session-id"] = "00000000-0000-4000-8000-000000000000"
    return {"method": request["method"], "path": request["path"], "headers": headers, "body": json.loads(body)}


def redact_transcript(text: str, root: str) -> str:
    """The transcript Claude Code wrote as a fixture, redacted as ``redact`` redacts a request: the
    run's temp directory and its session id replaced; still one JSON object a line."""
    text = text.replace(root, "/work").replace(root.replace("/", "-").replace(".", "-").replace("_", "-"), "-work")
    sessions = {e["sessionId"] for e in map(json.loads, text.splitlines()) if isinstance(e.get("sessionId"), str)}
    for session in sessions:
        text = text.replace(session, "00000000-0000-4000-8000-000000000000")
    return text


def load_fixtures() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]


def main() -> int:  # pragma: no cover - run by hand when the pinned version changes
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.scripted_model import ScriptedModel, file_writing_task

    if not installed():
        print("Claude Code is not installed: make clients", file=sys.stderr)
        return 1
    with FakeAnthropic() as server, tempfile.TemporaryDirectory() as tmp:
        workdir, home = Path(tmp, "project"), Path(tmp, "home")
        workdir.mkdir()
        home.mkdir()
        server.set_message_function(ScriptedModel(file_writing_task(str(workdir), content=CONTENT)))
        run = run_claude(server.base_url, "sk-fixture", workdir, home)
        if run.returncode != 0:
            print(run.stderr, file=sys.stderr)
            return 1
        shutil.rmtree(FIXTURES, ignore_errors=True)
        FIXTURES.mkdir(parents=True)
        for i, request in enumerate(server.requests):
            fixture = redact(request, tmp)
            (FIXTURES / f"{i:02d}.json").write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
        (transcript,) = run.transcripts()
        (FIXTURES / "transcript.jsonl").write_text(redact_transcript(transcript.read_text(), tmp))
        print(f"{len(server.requests)} requests saved in {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
