"""What one proxied exchange costs the web worker that records it: peak RSS and CPU seconds for a
30 MB request body, a 50 MB whole reply and a 50 MB streamed reply.

    .venv/bin/python bench/proxy_memory.py [--body-mb 30] [--reply-mb 50] [--only body|reply|stream]
        [--delta-chars 24]    # characters per streamed text delta (100000: the hostile re-test's shape)

ctxweb runs under gunicorn (one sync worker) on a fresh Postgres database; the upstream is the fake
Anthropic server in its own process (``tests/fakes``). Each scenario starts its own server, so the
worker's peak RSS (``VmHWM`` in ``/proc/<pid>/status``) is that scenario's. CPU is the worker's user +
system seconds from the request until its recording threads are done (its CPU stops moving). The body
is an agent's history as agents resend it: turns of a user's request with a tool's output (~8 kB).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._server import gunicorn_on_postgres, make_key
from tests.fakes.anthropic_server import FakeAnthropicProcess

MB = 1024 * 1024
TICK = os.sysconf("SC_CLK_TCK")


def history(size: int) -> list[dict[str, Any]]:
    """Alternating user turns (with a tool's output) and assistant answers, ``size`` bytes or so of JSON."""
    output = "\n".join(f"src/module.py:{i}: value = compute({i})  # checked and left as it is" for i in range(120))
    messages: list[dict[str, Any]] = []
    total, n = 0, 0
    while total < size:
        said = f"Step {n}: here is what the tool printed.\n{output}"
        messages += [{"role": "user", "content": said}, {"role": "assistant", "content": f"Step {n} read; next."}]
        total += len(said) + 80
        n += 1
    messages.append({"role": "user", "content": "Now summarize all of it."})
    return messages


def worker_pid(master: int) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.1)
    raise RuntimeError("no gunicorn worker")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def status_kb(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    return 0


def settled(pid: int, quiet: float = 3.0, limit: float = 600.0) -> float:
    """The worker's CPU seconds once they stopped moving for ``quiet`` seconds (recording done)."""
    deadline = time.monotonic() + limit
    last, since = cpu_seconds(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last > 0.02:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


def scenario(name: str, body: dict[str, Any], reply: str, text_piece: int) -> None:
    with FakeAnthropicProcess(text_piece=text_piece) as fake:
        extra_env = {"CTX_PROXY_UPSTREAM_URL": fake.base_url, "CTX_PROXY_TIMEOUT": "600"}
        with gunicorn_on_postgres(
            f"ctxweb_pcost_{name}_{os.getpid()}", workers=1, extra_env=extra_env, extra_args=["--timeout", "600"]
        ) as (hostport, env):
            key = make_key(env)
            fake.script(action="queue_reply", text=reply, timeout=120)
            master = next(
                int(p.name)
                for p in Path("/proc").iterdir()
                if p.name.isdigit()
                and "gunicorn" in (p / "cmdline").read_text(errors="replace")
                and hostport.split(":")[1] in (p / "cmdline").read_text(errors="replace")
            )
            pid = worker_pid(master)
            with httpx2.Client(timeout=600) as client:  # the project to record in; warms the worker up
                auth = {"Authorization": f"Bearer {key}"}
                made = client.post(f"http://{hostport}/api/v1/projects/", json={"name": "bench"}, headers=auth)
                made.raise_for_status()
            rss_before, cpu_before = status_kb(pid, "VmRSS"), cpu_seconds(pid)
            raw = json.dumps(body).encode()
            expect = len(body["messages"]) + 1
            headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01", "ctxweb-api-key": key}
            headers |= {"content-type": "application/json", "ctxweb-session": f"bench-{name}"}
            started = time.perf_counter()
            received = 0
            with (
                httpx2.Client(timeout=600) as client,
                client.stream(
                    "POST", f"http://{hostport}/proxy/anthropic/v1/messages", content=raw, headers=headers
                ) as response,
            ):
                for chunk in response.iter_raw():
                    received += len(chunk)
                status = response.status_code
                recorded = response.headers.get("ctxweb-recorded")
            answered = time.perf_counter() - started
            recorded_as = done(client_for(hostport, key), f"bench-{name}", expect)
            cpu = settled(pid) - cpu_before
            print(
                json.dumps(
                    {
                        "scenario": name,
                        "request_mb": round(len(raw) / MB, 1),
                        "answer_mb": round(received / MB, 1),
                        "status": status,
                        "recorded": recorded,
                        "answered_s": round(answered, 1),
                        "worker_rss_before_mb": round(rss_before / 1024),
                        "worker_peak_rss_mb": round(status_kb(pid, "VmHWM") / 1024),
                        "worker_cpu_s": round(cpu, 1),
                        "session": recorded_as,
                    }
                ),
                flush=True,
            )
            os.kill(pid, signal.SIGKILL)  # what it may still hold is not this measure's; the master goes on


def client_for(hostport: str, key: str) -> httpx2.Client:
    return httpx2.Client(base_url=f"http://{hostport}", timeout=60, headers={"Authorization": f"Bearer {key}"})


def done(client: httpx2.Client, external_id: str, expect: int, limit: float = 900.0) -> dict[str, Any]:
    """The session once it holds ``expect`` messages or a warning (what an oversized exchange leaves)."""
    deadline = time.monotonic() + limit
    found: dict[str, Any] = {}
    with client:
        while time.monotonic() < deadline:
            rows = client.get("/api/v1/sessions/", params={"q": external_id}).json()["results"]
            if rows:
                session = client.get(f"/api/v1/sessions/{rows[0]['id']}/").json()
                warnings = client.get(f"/api/v1/sessions/{rows[0]['id']}/status/").json()["warnings"]
                found = {"messages": session["message_count"], "warnings": [w[:120] for w in warnings]}
                if session["message_count"] >= expect or warnings:
                    return found
            time.sleep(1)
    return {**found, "timed_out": True}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--body-mb", type=float, default=30)
    parser.add_argument("--reply-mb", type=float, default=50)
    parser.add_argument("--only", choices=["body", "reply", "stream"], action="append")
    parser.add_argument("--delta-chars", type=int, default=24, help="characters per streamed text delta")
    args = parser.parse_args()
    small = [{"role": "user", "content": "Write it all out."}]
    base = {"model": "claude-sonnet-4-5", "max_tokens": 64000}
    # A streamed reply's events carry ~24 characters of text each, in ~130 bytes of event: its text is
    # the fraction of the stream's size that gives a stream of --reply-mb.
    plans = {
        "body": ({**base, "messages": history(int(args.body_mb * MB))}, "Done."),
        "reply": ({**base, "messages": small}, "x" * int(args.reply_mb * MB)),
        "stream": (
            {**base, "messages": small, "stream": True},
            "y" * int(args.reply_mb * MB * args.delta_chars / (args.delta_chars + 106)),
        ),
    }
    for name in args.only or list(plans):
        body, reply = plans[name]
        scenario(name, body, reply, args.delta_chars)


if __name__ == "__main__":
    main()
