"""The real Codex CLI (pinned in ``tests/clients/package.json``), run against a base URL.

``make clients`` installs it. Each run has a CODEX_HOME of its own whose ``config.toml`` names one
model provider: the base URL (``…/v1``; Codex posts to ``{base_url}/responses``), the Responses wire,
the upstream's key from ``FAKE_KEY`` and extra headers (``http_headers``: static ones; the ctxweb key
through ``env_http_headers``, so it never lands in the file). Codex writes the conversation as a
rollout file under ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``.

Run as a script, this module records what Codex sends to the scripted fake (``tests/fakes/scripted_codex.py``)
and saves it, redacted, as the fixtures under ``tests/fixtures/clients/codex_<version>/``: the requests
(``NN.json``) and the rollout (``rollout.jsonl``) of a plain run, ``compacted/`` for a run with a
window small enough that Codex compacts locally (it asks the model for a summary), and
``compacted_remote/`` for the same with the provider named ``OpenAI``, which Codex compacts remotely
(an input ending with ``compaction_trigger``, answered by one ``compaction`` item)::

    .venv/bin/python -m tests.clients.codex
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
CODEX = CLIENTS / "node_modules" / ".bin" / "codex"
VERSION = json.loads((CLIENTS / "package.json").read_text())["dependencies"]["@openai/codex"]
FIXTURES = CLIENTS.parent / "fixtures" / "clients" / f"codex_{VERSION}"
MODEL = "gpt-5.5"
KEY_ENV = "FAKE_KEY"
CTXWEB_KEY_ENV = "CTXWEB_API_KEY"
# A window and a limit that make Codex compact the scripted task mid-turn: its first request weighs
# about 10,000 tokens as the fake counts (instructions and tool definitions), the large output 5,000.
COMPACTING = {"model_context_window": 40000, "model_auto_compact_token_limit": 16000}


def installed() -> bool:
    return shutil.which("node") is not None and CODEX.exists()


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    workdir: Path
    home: Path

    def rollouts(self) -> list[Path]:
        """The rollout files Codex wrote, oldest first."""
        return sorted((self.home / "sessions").glob("*/*/*/rollout-*.jsonl"))


def _toml(value: object) -> str:
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # a JSON string, number or boolean is a TOML one too


def write_config(
    home: Path, base_url: str, *, headers: Mapping[str, str] | None = None, ctxweb_key: bool = False,
    settings: Mapping[str, object] | None = None, remote_compaction: bool = False,
) -> None:  # fmt: skip
    """``config.toml``: one provider at ``base_url``, nothing else to talk to (no update check, no
    analytics); ``settings`` are more top-level keys (``model_auto_compact_token_limit`` …).
    ``remote_compaction``: the provider is named ``OpenAI``, which is what makes Codex compact remotely."""
    name = "OpenAI" if remote_compaction else "fake"
    provider: dict[str, object] = {"name": name, "base_url": f"{base_url.rstrip('/')}/v1", "env_key": KEY_ENV,
                                   "wire_api": "responses"}  # fmt: skip
    if headers:
        provider["http_headers"] = dict(headers)
    if ctxweb_key:
        provider["env_http_headers"] = {"ctxweb-api-key": CTXWEB_KEY_ENV}
    top = {"model": MODEL, "model_provider": "fake", "check_for_update_on_startup": False, **(settings or {})}
    lines = [f"{k} = {_toml(v)}" for k, v in top.items()]
    lines += ["", "[analytics]", "enabled = false", "", "[model_providers.fake]"]
    lines += [f"{k} = {_toml(v)}" for k, v in provider.items()]
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("\n".join(lines) + "\n")


def run_codex(
    base_url: str, workdir: Path, home: Path, prompt: str, *, resume: bool = False, api_key: str = "sk-fake",
    headers: Mapping[str, str] | None = None, ctxweb_key: str | None = None,
    settings: Mapping[str, object] | None = None, remote_compaction: bool = False, timeout: float = 120,
) -> Run:  # fmt: skip
    """One ``codex exec`` (``resume``: ``codex exec resume --last``, the newest conversation goes on)."""
    write_config(home, base_url, headers=headers, ctxweb_key=ctxweb_key is not None, settings=settings,
                 remote_compaction=remote_compaction)  # fmt: skip
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "CODEX_HOME": str(home),
           KEY_ENV: api_key, **({CTXWEB_KEY_ENV: ctxweb_key} if ctxweb_key else {})}  # fmt: skip
    tail = ["resume", "--last", prompt] if resume else [prompt]
    out = subprocess.run(
        [str(CODEX), "exec", "--skip-git-repo-check", "-s", "danger-full-access", *tail],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    return Run(out.returncode, out.stdout, out.stderr, workdir, home)


_SECRET_HEADERS = ("authorization", "host", "content-length", "ctxweb-api-key")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _stable_ids(text: str, seen: dict[str, str]) -> str:
    """Every UUID (thread, turn, installation, message ids) as a stable placeholder, by first sight."""

    def stable(match: re.Match[str]) -> str:
        return seen.setdefault(match.group(0), f"00000000-0000-4000-8000-{len(seen):012d}")

    return _UUID.sub(stable, text)


def redact(request: Mapping[str, Any], root: str, seen: dict[str, str]) -> dict[str, Any]:
    """A recorded request as a fixture: headers without credentials or host, the run's temp directory
    as ``/work`` and the ids of this machine and run as placeholders (the same in every fixture)."""
    headers = {k: v for k, v in request["headers"].items() if k not in _SECRET_HEADERS}
    text = json.dumps({"path": request["path"], "headers": headers, "body": request["body"]}, ensure_ascii=False)
    return json.loads(_stable_ids(text.replace(root, "/work"), seen))


def redact_rollout(text: str, root: str, seen: dict[str, str]) -> str:
    return _stable_ids(text.replace(root, "/work"), seen)


def load_fixtures(folder: Path = FIXTURES) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def record(  # pragma: no cover - run by hand
    target: Path, settings: Mapping[str, object] | None = None, *, remote_compaction: bool = False
) -> int:
    from tests.fakes.openai_server import FakeOpenAI
    from tests.fakes.scripted_codex import FOLLOW_UP, PROMPT, ScriptedCodex

    with FakeOpenAI() as server, tempfile.TemporaryDirectory() as tmp:
        workdir, home = Path(tmp, "project"), Path(tmp, "home")
        workdir.mkdir()
        script = ScriptedCodex()
        server.responses.set_responder(script)
        for prompt, resume in ((PROMPT, False), (FOLLOW_UP, True)):
            run = run_codex(server.base_url, workdir, home, prompt, resume=resume, settings=settings,
                            remote_compaction=remote_compaction)  # fmt: skip
            if run.returncode != 0:
                print(run.stderr, file=sys.stderr)
                return 1
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        seen: dict[str, str] = {}
        for i, request in enumerate(server.requests):
            fixture = redact(request, tmp, seen)
            (target / f"{i:02d}.json").write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
        (rollout,) = run.rollouts()
        (target / "rollout.jsonl").write_text(redact_rollout(rollout.read_text(), tmp, seen))
        print(f"{len(server.requests)} requests ({script.summaries} summaries) saved in {target}")
    return 0


def main() -> int:  # pragma: no cover - run by hand when the pinned version changes
    if not installed():
        print("Codex is not installed: make clients", file=sys.stderr)
        return 1
    return (
        record(FIXTURES)
        or record(FIXTURES / "compacted", COMPACTING)
        or record(FIXTURES / "compacted_remote", COMPACTING, remote_compaction=True)
    )


if __name__ == "__main__":
    sys.exit(main())
