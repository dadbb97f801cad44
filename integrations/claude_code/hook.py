#!/usr/bin/env python3
"""Claude Code hook: mirrors the session's transcript into ctxweb and warns the agent when its
context window fills up. Standard library only (plus ``ctxclient`` from this repository).

    python3 integrations/claude_code/hook.py      # Claude Code runs it; the event's JSON comes on stdin

Environment: ``CTX_URL``, ``CTX_API_KEY``, ``CTX_PROJECT`` (project id or name); optional
``CTX_STATE_DIR`` (default ``~/.cache/ctxweb/claude-code``), ``CTX_HOOK_BUDGET`` (seconds one run may
take, default 8), ``CTX_TIMEOUT`` (seconds a whole request may take, default 10, cut to what is left of the budget;
any setting that is not a positive number of seconds takes its default),
``CTX_CHECKPOINT=0`` (never ask ctxweb for a checkpoint), ``CTX_DEBUG=1`` (errors on stderr too).

Each run uploads the complete lines the transcript gained since the last acknowledged upload (a
partial last line waits for the next run); the server parses them, so the ctxweb session (external
id = Claude Code's ``session_id``) ends up equal to a ``ctx import`` of the file. ``Stop``,
``SessionEnd`` and ``PreCompact`` also store the last response. What it prints is for the agent:
nothing below the policy's reminder level; the usage and the advice at or above it; above 90 % it
asks ctxweb for a checkpoint (a summarize compaction) and tells the agent to wrap up. It always
exits 0: an unreachable server, a bad key or anything else is logged to ``hook.log`` in the state
directory and the next run catches up. Within its time budget it retries what may pass: 429 (after
the ``Retry-After`` it asks for), 500/502/503/504 and lost connections, with backoff; a wait that
would outlast the budget gives up at once, which is safe because the server ignores bytes it has.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, BinaryIO

ROOT = Path(__file__).resolve().parents[2]  # the repository: ctxclient lives there
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

try:
    from ctxclient import ApiError, Client, Retry, Unreachable
except ImportError:  # copied away from its repository: stay harmless
    ApiError = Client = Retry = Unreachable = None  # type: ignore[assignment,misc]

FINAL_EVENTS = frozenset({"Stop", "SessionEnd", "PreCompact"})
CHECKPOINT_PERCENT = 90.0
MAX_UPLOAD = 4 * 1024 * 1024  # bytes per request; a longer single line goes alone
# A line longer than this (a huge tool output or image) is sent as a short note instead, which the
# server records as a skipped line: one line must not block the stream by exceeding the server's body
# limit (CTX_MAX_BODY_BYTES, 16 MiB by default; JSON escaping can double a line).
MAX_LINE = 7 * 1024 * 1024
MAX_RELOCATIONS = 3
LOG_LIMIT = 256 * 1024
LOCK_WAIT = 20.0  # at most; never more than half the run's budget
DEFAULT_BUDGET = 8.0  # seconds a run may hold Claude Code up, retries included
DEFAULT_TIMEOUT = 10.0  # seconds one request may take in all, cut to what is left of the budget
FLUSH_WAIT = 1.5  # seconds a Stop waits for its last reply to reach the file


def main(
    stdin: str | IO[str] | None = None, env: Mapping[str, str] | None = None, stdout: IO[str] | None = None
) -> int:
    """Run once for one hook event. Returns 0, whatever happens."""
    env = os.environ if env is None else env
    text = ""
    try:
        raw = stdin if isinstance(stdin, str) else (stdin or sys.stdin).read()
        event = json.loads(raw) if raw.strip() else {}
        text = run(event if isinstance(event, dict) else {}, env)
    except Exception as exc:  # never break the agent
        _log(env, f"hook failed: {exc!r}")
    if text:
        _write(stdout, text)
    return 0


def run(event: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Upload what is new and return what to print (maybe nothing)."""
    url, key, project = env.get("CTX_URL"), env.get("CTX_API_KEY"), env.get("CTX_PROJECT")
    session_id, path = event.get("session_id"), event.get("transcript_path")
    if Client is None or not (url and key and project):
        return ""
    if not (isinstance(session_id, str) and session_id and isinstance(path, str) and path):
        return ""
    transcript = Path(path).expanduser()
    if not transcript.is_file():
        return ""
    hook_event = str(event.get("hook_event_name") or "")
    directory = state_dir(env)
    ident = hashlib.sha256(f"{url}\n{project}\n{session_id}".encode()).hexdigest()[:32]
    state_path = directory / f"{ident}.json"
    budget = _seconds(env, "CTX_HOOK_BUDGET", DEFAULT_BUDGET)
    retry = Retry.within(budget, notify=lambda message: _log(env, message))
    client = Client(url, key, timeout=_seconds(env, "CTX_TIMEOUT", DEFAULT_TIMEOUT), retry=retry)
    if hook_event == "Stop":
        _await_written(transcript, event.get("last_assistant_message"), wait=min(FLUSH_WAIT, budget / 4))
    with _locked(directory / f"{ident}.lock", wait=min(LOCK_WAIT, budget / 2)):
        state = _load(state_path)
        try:
            answer = sync(
                client,
                state,
                lambda: _save(state_path, state),
                project=project,
                external_id=session_id,
                path=transcript,
                final=hook_event in FINAL_EVENTS,
            )
        except Unreachable as exc:
            _log(env, str(exc))
            return ""
        except ApiError as exc:
            _log(env, f"ctxweb answered {exc.status} {exc.code}: {exc.detail}")
            if exc.code == "session_closed" and not state.get("closed_noted"):
                state["closed_noted"] = True
                _save(state_path, state)
                return _for_agent(
                    hook_event,
                    f"ctxweb: session {state.get('session', '?')} is closed (handed off), so this conversation is no "
                    "longer recorded there. Start a fresh session from its handoff document when you can.",
                )
            return ""
        text = advice(client, state, answer, env)
        following = answer.get("continued_in")
        if isinstance(following, int) and state.get("continued_in") != following:
            # ctxweb handed the session off (auto-continue): its messages now go to the fresh one.
            state["continued_in"] = following
            text = (
                f"ctxweb handed session {answer.get('session')} off into session {following}, which starts from "
                "its handoff document; this conversation is recorded there from now on. " + text
            ).strip()
        _save(state_path, state)
    return _for_agent(hook_event, text)


def _await_written(path: Path, last_reply: Any, *, wait: float) -> bool:
    """Whether the transcript holds the turn's last reply, waiting up to ``wait`` seconds for it.

    Claude Code may run Stop before its last lines reach the file: a final upload then would let the
    user lines held for the request they went into go as they are (the request's own copy, which the
    import of the whole file reads, comes in a later line). Stop's ``last_assistant_message`` says what
    the file must hold first; the start of its text, as JSON writes it, is looked for in the file's end."""
    if not isinstance(last_reply, str) or not last_reply.strip():
        return True
    needle = json.dumps(last_reply[:80], ensure_ascii=False)[1:-1].encode()
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError), open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            f.seek(max(0, size - 4 * 1024 * 1024))
            if needle in f.read():
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


# ----------------------------------------------------------------------------- uploading


def sync(
    client: Client,
    state: dict[str, Any],
    save: Callable[[], None],
    *,
    project: str,
    external_id: str,
    path: Path,
    final: bool,
    max_upload: int = MAX_UPLOAD,
) -> dict[str, Any]:
    """Send the complete lines after ``state["file_pos"]``, in slices; returns the last answer.

    ``file_pos`` is where the hook is in the file, ``offset`` where the server is in what it received
    (the same number unless the file holds bytes that aren't UTF-8). Both advance only on an answer."""
    file_pos, sent = _position(state.get("file_pos")), _position(state.get("offset"))
    relocations = 0
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if file_pos > size:  # replaced or truncated: from the top (the server ignores what it has)
            file_pos = sent = 0
        limit = _complete_end(f, size)
        while True:
            end = _slice_end(f, file_pos, limit, max_upload)
            f.seek(file_pos)
            lines = as_sent(f.read(end - file_pos))
            try:
                answer = client.upload_transcript(
                    project, external_id, lines, offset=sent, final=final and end >= limit, name=path.stem
                )
            except ApiError as exc:
                expected = exc.data.get("expected_offset")
                if exc.status != 409 or not isinstance(expected, int) or relocations >= MAX_RELOCATIONS:
                    raise
                relocations += 1
                file_pos, sent = _locate(f, limit, expected, file_pos, sent)
                continue
            state["session"] = answer["session"]
            sent_end = sent + len(lines.encode("utf-8"))
            if answer["offset"] == sent_end:
                file_pos, sent = end, sent_end
                state.update(file_pos=file_pos, offset=sent)
                save()
                if end >= limit:
                    return answer
                continue
            # The server holds more than this hook thought (its state was lost): continue from there.
            if relocations >= MAX_RELOCATIONS:
                return answer
            relocations += 1
            file_pos, sent = _locate(f, limit, answer["offset"], end, sent_end)


def _complete_end(f: BinaryIO, size: int) -> int:
    """Where the last complete line of the file ends (0 if none)."""
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        f.seek(start)
        block = f.read(pos - start)
        newline = block.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        pos = start
    return 0


def _slice_end(f: BinaryIO, start: int, limit: int, max_upload: int) -> int:
    """The end of the next slice: whole lines, at most ``max_upload`` bytes unless one line is longer."""
    if limit - start <= max_upload:
        return max(start, limit)
    f.seek(start)
    block = f.read(max_upload)
    newline = block.rfind(b"\n")
    if newline >= 0:
        return start + newline + 1
    pos = start + len(block)
    while pos < limit:  # one line longer than a slice: it goes alone
        block = f.read(65536)
        newline = block.find(b"\n")
        if newline >= 0:
            return pos + newline + 1
        pos += len(block)
    return limit


def _locate(f: BinaryIO, limit: int, target: int, file_pos: int, sent: int) -> tuple[int, int]:
    """The file position where the server's byte ``target`` starts, on a line boundary; else the top."""
    if target == sent:
        return file_pos, sent
    if target == 0:
        return 0, 0
    f.seek(0)
    pos = acc = 0
    while pos < limit and acc < target:
        line = f.readline()
        if not line:
            break
        pos += len(line)
        acc += len(as_sent(line).encode("utf-8"))
    return (pos, acc) if acc == target and pos <= limit else (0, 0)


def as_sent(raw: bytes) -> str:
    """What the server receives for these whole lines: their text (bytes that aren't UTF-8 replaced),
    with each line longer than ``MAX_LINE`` replaced by a note of its size."""
    if len(raw) <= MAX_LINE:
        return raw.decode("utf-8", errors="replace")
    lines = raw.splitlines(keepends=True)
    return "".join(
        line.decode("utf-8", errors="replace")
        if len(line) <= MAX_LINE
        else json.dumps({"type": "ctxweb-line-too-long", "bytes": len(line)}) + "\n"
        for line in lines
    )


# ----------------------------------------------------------------------------- advice


def advice(client: Client, state: dict[str, Any], answer: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Nothing below the reminder level; usage and the recommendation at or above it; above 90 %, a
    checkpoint requested from ctxweb and a request to wrap up."""
    status = answer.get("status") or {}
    percent = float(status.get("usage_percent") or 0.0)
    level = str(status.get("level") or "ok")
    if percent <= CHECKPOINT_PERCENT:
        state.pop("checkpoint", None)  # the next crossing asks again
        if level == "ok":
            return ""
    head = (
        f"ctxweb: this session's context is {percent:.1f}% full "
        f"({status.get('used', 0):,} of {status.get('context_window', 0):,} tokens; level {level})."
    )
    if percent <= CHECKPOINT_PERCENT:
        return f"{head} {status.get('recommendation') or ''}".strip()
    return (
        f"⚠️ {head} {_checkpoint(client, state, answer, env)} Finish the step you are on, note what is left "
        "to do, then compact (/compact) or continue in a fresh session."
    )


def _checkpoint(client: Client, state: dict[str, Any], answer: Mapping[str, Any], env: Mapping[str, str]) -> str:
    status = answer.get("status") or {}
    if status.get("will_compact"):
        return "ctxweb compacts it automatically (with a checkpoint once it summarizes)."
    if env.get("CTX_CHECKPOINT", "1") == "0":
        return "Write a checkpoint of your progress now."
    if state.get("checkpoint"):
        return f"A checkpoint was requested (ctxweb compaction {state['checkpoint']})."
    try:
        record = client.compact(
            answer.get("continued_in") or answer["session"],  # the session taking the messages now
            level="summarize",
            instructions="Checkpoint requested by the Claude Code hook: the context is above 90 %.",
        )
    except ApiError as exc:
        if exc.code != "compaction_in_progress":
            _log(env, f"checkpoint request refused: {exc.status} {exc.code}: {exc.detail}")
            return "Write a checkpoint of your progress now."
        state["checkpoint"] = "in progress"
        return "ctxweb is already compacting it; a checkpoint comes with the summary."
    except Unreachable as exc:
        _log(env, str(exc))
        return "Write a checkpoint of your progress now."
    state["checkpoint"] = record["id"]
    return f"ctxweb is writing a checkpoint now (compaction {record['id']})."


def _for_agent(hook_event: str, text: str) -> str:
    """PostToolUse output reaches the model only as ``additionalContext``; UserPromptSubmit and
    SessionStart add plain stdout to the context; elsewhere the user sees it in the transcript."""
    if not text:
        return ""
    if hook_event == "PostToolUse":
        payload = {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": text}}
        return json.dumps(payload, ensure_ascii=False) + "\n"
    return text + "\n"


# ----------------------------------------------------------------------------- state, lock, log


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """A positive, finite number of seconds from the environment; ``default`` for anything else
    ("nan", "-1", "10s"), so a typo in a setting does not stop every upload."""
    try:
        seconds = float(env.get(name) or default)
    except ValueError:
        return default
    return seconds if 0 < seconds < float("inf") else default


def state_dir(env: Mapping[str, str]) -> Path:
    if env.get("CTX_STATE_DIR"):
        return Path(env["CTX_STATE_DIR"]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ctxweb" / "claude-code"


def _position(value: Any) -> int:
    """A byte position from the state file; 0 (from the top: the server ignores what it has) for
    anything but a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _load(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _save(path: Path, state: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state), encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(path: Path, *, wait: float) -> Iterator[None]:
    """One run at a time per session (Claude Code may run hooks in parallel). Only an optimisation:
    the server's offset check keeps concurrent uploads correct, so after ``wait`` it goes on without."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        deadline = time.monotonic() + wait
        locked = False
        while not locked and time.monotonic() < deadline:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except OSError:
                time.sleep(0.05)
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _log(env: Mapping[str, str], message: str) -> None:
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {message}\n"
    if env.get("CTX_DEBUG") == "1":
        with contextlib.suppress(Exception):
            sys.stderr.write(line)
    with contextlib.suppress(Exception):
        path = state_dir(env) / "hook.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_LIMIT:
            path.write_text(path.read_text(encoding="utf-8", errors="replace")[-LOG_LIMIT // 2 :], encoding="utf-8")
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line)


def _write(stdout: IO[str] | None, text: str) -> None:
    with contextlib.suppress(Exception):
        if stdout is not None:
            stdout.write(text)
            return
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:
            buffer.write(text.encode("utf-8"))
            buffer.flush()
        else:
            sys.stdout.write(text)
            sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
