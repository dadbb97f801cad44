"""What the Anthropic-compatible proxy adds to a streamed request: time to first byte and to the end
of the stream, through ctxweb against straight to the upstream, under concurrent agents.

    .venv/bin/python bench/proxy.py [--agents 20] [--turns 15] [--interval 0.01] [--threads 8] [--litellm BIN]

The upstream is the fake Anthropic server in its own process (``tests/fakes``), streaming each reply
as ~40 events ``--interval`` seconds apart. ctxweb runs under gunicorn with threads (a stream holds a
thread for as long as it runs) on a fresh Postgres database. Each agent holds a conversation that
grows by a turn per request, resent whole each time as agents do, with a tool call and its output in
every turn; for every turn it sends the same request straight to the upstream and through the proxy,
in alternating order, over its own keep-alive connections. Prints the medians and p95 of both, and
the proxy's overhead per turn (proxy − direct, paired): the target is a p50 overhead under 20 ms.
Afterwards, from the database: every agent's session holds each message once.

``--litellm BIN`` adds a third leg in the same run: LiteLLM's proxy (``BIN``, the ``litellm`` command of
a venv of its own: ``python3.11 -m venv /tmp/litellm-venv && /tmp/litellm-venv/bin/pip install
"litellm[proxy]"``) with ``--web`` workers, no database, forwarding its Anthropic-format
``/v1/messages`` to the same fake upstream. Then the CPU each proxy spent per 1,000 requests is printed
too (read from /proc, ``bench/_cpu.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._cpu import cpu_by_kind
from bench._server import Client, free_port, gunicorn_on_postgres, make_key
from tests.fakes.anthropic_server import FakeAnthropicProcess

MODEL = "claude-sonnet-4-5"
LITELLM_KEY = "sk-bench-litellm-master-key"


REPLY = "I checked it. " * 40  # the upstream's answer: ~40 events streamed


def turn(agent: int, n: int) -> dict[str, Any]:
    """A user's next message with what a tool printed (a few kB, as agents read)."""
    output = "\n".join(f"src/agent_{agent}/module_{n}.py:{i}: value = compute({i}, {n})  # checked" for i in range(40))
    return {"role": "user", "content": f"Step {n}: here is module {n} of agent {agent}; report.\n{output}"}


def timed(client: httpx2.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[float, float, int]:
    """Seconds to the first byte of the body and to the end of the stream; the status."""
    started = time.perf_counter()
    first = None
    with client.stream("POST", url, json=body, headers=headers) as response:
        for chunk in response.iter_raw():
            if first is None and chunk:
                first = time.perf_counter()
        status = response.status_code
    end = time.perf_counter()
    return (first or end) - started, end - started, status


def run_agent(
    agent: int,
    turns: int,
    direct: str,
    proxied: str,
    key: str,
    out: dict[str, list[Any]],
    litellm: str | None = None,
    session: str = "bench-agent",
) -> None:
    headers = {"x-api-key": "sk-bench", "anthropic-version": "2023-06-01", "content-type": "application/json"}
    through = {**headers, "ctxweb-api-key": key, "ctxweb-session": f"{session}-{agent}"}
    history: list[dict[str, Any]] = []
    with (
        httpx2.Client(timeout=60) as to_upstream,
        httpx2.Client(timeout=60) as to_proxy,
        httpx2.Client(timeout=60) as to_litellm,
    ):
        for n in range(turns):
            if history:  # the model's answer to the turn before, as the agent keeps it
                history.append({"role": "assistant", "content": [{"type": "text", "text": REPLY}]})
            history.append(turn(agent, n))
            body = {"model": MODEL, "max_tokens": 512, "stream": True, "messages": history}
            legs = [("direct", to_upstream, direct, headers), ("proxy", to_proxy, proxied, through)]
            if litellm is not None:
                legs.append(("litellm", to_litellm, litellm, {**headers, "x-api-key": LITELLM_KEY}))
            legs = legs[n % len(legs) :] + legs[: n % len(legs)]  # each leg first in turn
            got = {}
            for name, client, url, sent in legs:
                ttfb, total, status = timed(client, url, body, sent)
                got[name] = (ttfb, total)
                out["status"].append(status)
            for name in got:
                out[name].append(got[name])


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between the upstream's events")
    parser.add_argument("--web", type=int, default=4, help="gunicorn workers")
    parser.add_argument("--threads", type=int, default=8, help="threads per gunicorn worker")
    parser.add_argument("--litellm", default=None, help="LiteLLM's litellm command: a third leg through it")
    args = parser.parse_args()
    with FakeAnthropicProcess() as fake:
        fake.script(action="set_event_interval", seconds=args.interval)
        fake.script(action="set_default_reply", text=REPLY)
        env = {"CTX_PROXY_UPSTREAM_URL": fake.base_url, "CELERY_TASK_ALWAYS_EAGER": "1"}
        threads = ["--worker-class", "gthread", "--threads", str(args.threads)]
        with gunicorn_on_postgres("ctxweb_bench_proxy", workers=args.web, extra_env=env, extra_args=threads) as (
            hostport,
            app_env,
        ):
            key = make_key(app_env)
            status, _ = Client(hostport, key).call("POST", "/api/v1/projects/", {"name": "proxy bench"})
            assert status == 201, status
            out: dict[str, list[Any]] = {"direct": [], "proxy": [], "litellm": [], "status": []}
            proxy_url = f"http://{hostport}/proxy/anthropic/v1/messages"
            stack = contextlib.ExitStack()
            group, litellm_url = 0, None
            if args.litellm:
                group, litellm_url = stack.enter_context(litellm_proxy(args.litellm, fake.base_url, args.web))
            if args.litellm:  # its workers' first requests load what they use: not what is measured
                direct_url = f"{fake.base_url}/v1/messages"
                for warm in range(args.web * 2):
                    scratch: dict[str, list[Any]] = {k: [] for k in out}
                    run_agent(warm, 3, direct_url, proxy_url, key, scratch, litellm_url, session="bench-warm")
            cpu_before = {**cpu_by_kind(), "LiteLLM": group_cpu(group)}
            started = time.perf_counter()
            agents = [
                threading.Thread(
                    target=run_agent,
                    args=(
                        a,
                        args.turns,
                        f"{fake.base_url}/v1/messages",
                        proxy_url,
                        key,
                        out,
                        litellm_url,
                    ),
                )
                for a in range(args.agents)
            ]
            for t in agents:
                t.start()
            for t in agents:
                t.join()
            elapsed = time.perf_counter() - started
            cpu_after = {**cpu_by_kind(), "LiteLLM": group_cpu(group)}
            stack.close()
            stored = _stored(app_env)
    n = len(out["proxy"])
    print(f"{args.agents} agents × {args.turns} streamed turns, each straight and through the proxy "
          f"(gunicorn {args.web} × {args.threads} threads, upstream events {args.interval * 1000:.0f} ms apart): "
          f"{elapsed:.1f} s")  # fmt: skip
    print(f"{'':28}{'p50 ms':>10}{'p95 ms':>10}")
    legs = ["proxy", "litellm"] if args.litellm else ["proxy"]
    for label, index in (("time to first byte", 0), ("time to the end", 1)):
        for leg in ("direct", *legs):
            values = [v[index] * 1000 for v in out[leg]]
            print(f"{label + ', ' + leg:28}{statistics.median(values):>10.1f}{pct(values, 0.95):>10.1f}")
        for leg in legs:
            overhead = [(p[index] - d[index]) * 1000 for p, d in zip(out[leg], out["direct"], strict=True)]
            named = "overhead" if leg == "proxy" else f"{leg} overhead"
            print(f"{label + ', ' + named:28}{statistics.median(overhead):>10.1f}{pct(overhead, 0.95):>10.1f}")
    kinds = [("web (gunicorn)", "ctxweb (gunicorn)"), ("Postgres", "ctxweb's Postgres")]
    for kind, leg in kinds + ([("LiteLLM", "LiteLLM")] if args.litellm else []):
        spent = cpu_after[kind] - cpu_before[kind]
        print(f"CPU per 1,000 requests, {leg}: {spent / max(1, n) * 1000:.1f} s")
    bad = [s for s in out["status"] if s != 200]
    expected = args.turns * 2  # per turn: the user's message and the recorded reply
    print(f"requests: {len(out['status'])}, non-200 answers: {len(bad)}")
    wrong = {agent: count for agent, count in stored.items() if count != expected}
    verdict = "PASS" if not wrong and len(stored) == args.agents else "FAIL"
    print(
        f"{verdict}  every session holds each message once ({expected} each): {len(stored)} sessions, {len(wrong)} off"
    )
    return 0 if not bad and not wrong else 1


@contextlib.contextmanager
def litellm_proxy(command: str, upstream: str, workers: int) -> Iterator[tuple[int, str]]:
    """LiteLLM's proxy in front of ``upstream`` on a free port, no database (it stores nothing); yields
    its process group and its ``/v1/messages`` address."""
    config = Path(tempfile.mkdtemp(prefix="bench-litellm-")) / "config.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: anthropic/{MODEL}\n"
        f"      api_base: {upstream}\n"
        "      api_key: sk-bench\n"
    )
    port = free_port()
    # Its key (it refuses to start without one); the cost map it has (nothing fetched); errors only.
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": LITELLM_KEY,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "ERROR",
    }
    command_line = [command, "--config", str(config), "--port", str(port), "--num_workers", str(workers)]
    proc = subprocess.Popen(
        command_line, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )  # a process group of its own: its workers' CPU is read by it (``group_cpu``)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/health/liveliness", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("LiteLLM's proxy did not start")
        yield proc.pid, f"http://127.0.0.1:{port}/v1/messages"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def group_cpu(group: int) -> float:
    """CPU seconds of the live processes of process group ``group`` (0: none)."""
    seconds = 0.0
    for proc in Path("/proc").iterdir() if group else ():
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # not a process, or gone meanwhile
            continue
        if int(fields[2]) == group:  # pgrp
            seconds += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return seconds


def _stored(env: dict[str, str]) -> dict[str, int]:
    query = "SELECT external_id, message_count FROM sessions_app_agentsession WHERE external_id LIKE 'bench-agent-%'"
    url = env["DATABASE_URL"]
    rows = subprocess.run(["psql", url, "-At", "-F", "\t", "-c", query], capture_output=True, text=True, check=True)
    return {line.split("\t")[0]: int(line.split("\t")[1]) for line in rows.stdout.splitlines() if line}


if __name__ == "__main__":
    raise SystemExit(main())
