"""The real OpenCode CLI (``opencode-ai``, pinned in ``tests/clients/package.json``), run against a base URL.

``make clients`` installs it. It runs as ``opencode run --format json <prompt>`` with a config of its
own (``OPENCODE_CONFIG``: the anthropic provider at ``base_url``, no sharing, no updates) and a HOME
and XDG directories of its own. Run as a script, this module records what it sends to the scripted
upstream and saves it, redacted, as the fixtures under ``tests/fixtures/clients/opencode_<version>/``
that unit tests replay without npm::

    .venv/bin/python -m tests.clients.opencode
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
OPENCODE = CLIENTS / "node_modules" / ".bin" / "opencode"
VERSION = json.loads((CLIENTS / "package.json").read_text())["dependencies"]["opencode-ai"]
FIXTURES = CLIENTS.parent / "fixtures" / "clients" / f"opencode_{VERSION}"
MODEL = "claude-sonnet-4-5"
SMALL_MODEL = "claude-haiku-4-5"  # what OpenCode asks for a title
PROMPT = "Write the line 'hello from ctxweb' into result.txt in the working directory, then check it."
CONTENT = "hello from ctxweb\n"
SESSION_PLACEHOLDER = "ses_00000000000000000000000000"


def installed() -> bool:
    return OPENCODE.exists()


@dataclass
class Run:
    returncode: int
    events: list[dict[str, Any]]  # the --format json lines
    stderr: str
    workdir: Path
    home: Path

    def session_ids(self) -> set[str]:
        return {e["sessionID"] for e in self.events if isinstance(e.get("sessionID"), str)}

    def tool_calls(self) -> list[dict[str, Any]]:
        return [e["part"] for e in self.events if e.get("type") == "tool_use"]

    def finished(self) -> list[str]:
        """Why each of the model's steps ended (``tool-calls``, ``stop``)."""
        return [e["part"].get("reason", "") for e in self.events if e.get("type") == "step_finish"]


def opencode_config(base_url: str, api_key: str, ctxweb_key: str | None = None) -> dict[str, Any]:
    """The anthropic provider at ``base_url`` (ctxweb's ``/proxy/anthropic``, or the fake); a
    ``ctxweb_key`` goes in a header of its own (docs/PROXY.md), the upstream's key stays the API key."""
    options: dict[str, Any] = {"baseURL": f"{base_url.rstrip('/')}/v1", "apiKey": api_key}
    if ctxweb_key:
        options["headers"] = {"ctxweb-api-key": ctxweb_key}
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"anthropic/{MODEL}",
        "small_model": f"anthropic/{SMALL_MODEL}",
        "enabled_providers": ["anthropic"],
        "provider": {"anthropic": {"options": options}},
        "autoupdate": False,
        "share": "disabled",
        "permission": {"*": "allow"},
    }


def opencode_env(config: Path, home: Path) -> dict[str, str]:
    """No traffic but to the configured base URL: no model list, update, share, plugin or LSP
    download; a HOME and XDG directories of its own."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENCODE_CONFIG": str(config),
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    }


def run_opencode(
    base_url: str, api_key: str, workdir: Path, home: Path, *, ctxweb_key: str | None = None, timeout: float = 180
) -> Run:
    config = home / "opencode.json"
    config.write_text(json.dumps(opencode_config(base_url, api_key, ctxweb_key), indent=1))
    out = subprocess.run(
        [str(OPENCODE), "run", "--pure", "--format", "json", "--model", f"anthropic/{MODEL}", PROMPT],
        cwd=workdir, env=opencode_env(config, home), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    events = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return Run(out.returncode, events, out.stderr, workdir, home)


_SECRET_HEADERS = ("x-api-key", "authorization", "host", "content-length", "ctxweb-api-key")
_SESSION_HEADERS = ("x-session-id", "x-session-affinity")
_DATE = re.compile(r"Today's date: \w{3} \w{3} \d{2} \d{4}")


def redact(request: Mapping[str, Any], root: str) -> dict[str, Any]:
    """A recorded request as a fixture: its headers (credentials and host out) and its body, with the
    run's temp directory (``root``), OpenCode's session id and the date replaced by stable placeholders."""
    body = json.dumps(request["body"], ensure_ascii=False).replace(root, "/work")
    body = _DATE.sub("Today's date: Thu Jan 01 2026", body)
    session = request["headers"].get("x-session-id", "")
    if session:
        body = body.replace(session, SESSION_PLACEHOLDER)
    headers = {k: v for k, v in request["headers"].items() if k not in _SECRET_HEADERS}
    for name in _SESSION_HEADERS:
        if name in headers:
            headers[name] = SESSION_PLACEHOLDER
    return {"method": request["method"], "path": request["path"], "headers": headers, "body": json.loads(body)}


def load_fixtures() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))]


def main() -> int:  # pragma: no cover - run by hand when the pinned version changes
    from tests.fakes.anthropic_server import FakeAnthropic
    from tests.fakes.scripted_model import ScriptedModel
    from tests.fakes.scripted_opencode import coding_task, is_opencode_main

    if not installed():
        print("OpenCode is not installed: make clients", file=sys.stderr)
        return 1
    with FakeAnthropic() as server, tempfile.TemporaryDirectory() as tmp:
        workdir, home = Path(tmp, "project"), Path(tmp, "home")
        workdir.mkdir()
        home.mkdir()
        server.set_message_function(ScriptedModel(coding_task(str(workdir), content=CONTENT), is_main=is_opencode_main))
        run = run_opencode(server.base_url, "sk-fixture", workdir, home)
        if run.returncode != 0 or (workdir / "result.txt").read_text() != CONTENT:
            print(run.stderr, file=sys.stderr)
            return 1
        shutil.rmtree(FIXTURES, ignore_errors=True)
        FIXTURES.mkdir(parents=True)
        for i, request in enumerate(server.requests):
            fixture = redact(request, tmp)
            (FIXTURES / f"{i:02d}.json").write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
        print(f"{len(server.requests)} requests saved in {FIXTURES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
