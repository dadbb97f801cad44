"""Generated Claude Code transcripts as versions that write ``api-request-blob`` lines write them
(tests/fixtures/clients/claude_code_2.1.328/transcript.jsonl is a real one), each with the main
conversation as the model read it: for every request, the user message it sent (the blob's content,
or the user lines themselves when no blob was written) and the response.

A request is: its user lines (a typed prompt, or the results of the previous response's tool calls,
one line each, in any order, some written while that response still streamed), ``attachment``
lines, the blob (the results, a reminder inside the last one, the attachments' reminders as text
blocks; or the reminders and the prompt), an ``api-request`` line, then the response's lines. Around
them: Claude Code's own compactions, sub-agent lines in the same file (one left waiting for its
response), retried blobs, repeated and unreadable lines."""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import strategies as st

from compaction.transcripts.base import content_of
from compaction.transcripts.claude_code_lines import lines_as_sent, sent_hash
from tests.transcript_stream import Writer, text_block, tool_block

Block = dict[str, Any]
# Words a person types (no NUL or lone surrogates: storage cleans those, and the model below doesn't).
WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), max_size=12)
REQUEST = st.tuples(
    st.just("request"),
    st.sampled_from([0, 1, 2, 2, 3, 3]),  # tool calls in the response (0: it ends the turn)
    st.booleans(),  # thinking
    st.booleans(),  # results written while the response streams
    st.integers(0, 2),  # attachments
    st.sampled_from(["blob", "blob", "blob", "lines", "none", "retry"]),  # how the request is written
    st.integers(0, 2**16),  # order of the results
    WORDS,  # what the user types when a prompt is due
)
BLOB_STEP = st.one_of(
    REQUEST,
    REQUEST,
    REQUEST,
    REQUEST,
    st.tuples(st.just("boundary"), WORDS),
    st.tuples(st.just("sidechain"), st.booleans()),  # left waiting for its response
    st.tuples(st.just("repeat"), st.integers(0, 80)),
    st.tuples(st.just("junk"), st.sampled_from(["{not json", '{"type": "api-request-blob"}', "[]"])),
    st.tuples(
        st.just("progress"),
    ),
)


def reminder(text: str) -> Block:
    return text_block(f"<system-reminder>\n{text}\n</system-reminder>")


class BlobWriter(Writer):
    """A ``Writer`` that also writes request blobs and keeps ``sent``: the main conversation as the
    model read it (role and canonical content, what the reader must make of the file)."""

    def __init__(self, session: str) -> None:
        super().__init__(session)
        self.sent: list[tuple[str, Any]] = []
        self.lines_of_request: list[Any] = []  # content of the user lines since the last response
        self.pending: list[str] = []  # tool calls of the last response whose results are due
        self.results_written: list[tuple[str, str]] = []  # (tool id, output) written while streaming
        self.hashes: set[str] = set()
        self.summary: str | None = None  # Claude Code's compaction summary, sent with the next request
        self.requests = 0

    def user_line(self, content: Any, **extra: Any) -> None:
        self.event("user", {"role": "user", "content": content}, **extra)
        self.lines_of_request.append(content)

    def attachment(self, n: int) -> Block:
        text = f"Attachment {self.requests}.{n}"
        self.event("attachment", None, attachment={"type": "date", "text": text})
        return reminder(text)

    def send(self, content: list[Block], mode: str) -> None:
        """The request: its blob as ``mode`` says, the ``api-request`` line, and what the model read.

        ``blob``: written; ``retry``: written twice; ``none``: lost (an older writer); ``lines``: the
        user lines together are the message sent (nothing injected), so Claude Code writes no blob."""
        lines = self.lines_of_request
        if mode == "lines":
            content = lines_as_sent(lines)
        message = {"role": "user", "content": content}
        digest = sent_hash("user", content)
        if mode in ("blob", "retry"):
            for _ in range(2 if mode == "retry" else 1):
                blob = {"type": "api-request-blob", "sessionId": self.session, "hash": digest, "message": message}
                self.raw(json.dumps(blob, ensure_ascii=False))
        fresh = digest not in self.hashes
        if mode in ("blob", "retry"):
            self.hashes.add(digest)
        if (mode in ("blob", "retry") and fresh) or (mode == "lines" and len(lines) > 1):
            self.sent.append(("user", content_of(content)))
        else:
            self.sent += [("user", content_of(c)) for c in lines]
        self.lines_of_request = []
        request = {"type": "api-request", "sessionId": self.session, "keep": len(self.sent) - 1, "tail": [digest]}
        self.raw(json.dumps(request))

    def request(self, step: tuple) -> None:
        _, tools, thinking, streamed, attachments, mode, order, words = step
        self.requests += 1
        n = self.requests
        due, early = self.pending, dict(self.results_written)
        late = [t for t in due if t not in early]
        random.Random(order).shuffle(late)
        for tool_id in late:  # parallel results: one line each, in the order the tools finished
            self.user_line([{"type": "tool_result", "tool_use_id": tool_id, "content": f"out {tool_id}"}])
        if not due:
            self.user_line(words or f"prompt {n}")
        reminders = [self.attachment(k) for k in range(attachments)]
        count = reminder(f"{n} requests so far")  # Claude Code's token count reminder, new every request
        content: list[Block] = [text_block(self.summary)] if self.summary is not None else []
        if due:  # the request sends the results in call order, the reminder inside the last one
            outputs = {**early, **{t: f"out {t}" for t in late}}
            results = [{"type": "tool_result", "tool_use_id": t, "content": outputs[t]} for t in due]
            results[-1]["content"] = f"{results[-1]['content']}\n\n{count['text']}"
            content += results + reminders
        else:
            content += [*reminders, count, text_block(words or f"prompt {n}")]
        self.summary = None
        self.send(content, mode)
        self.respond(n, tools, thinking, streamed)

    def respond(self, n: int, tools: int, thinking: bool, streamed: bool) -> None:
        mid = f"msg_r{n}"
        blocks: list[Block] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": f"plan {n}", "signature": f"sig{n}"})
        blocks.append(text_block(f"Answer {n}."))
        self.pending, self.results_written = [], []
        for block in blocks:
            self.block(mid, block)
        for k in range(tools):
            tool_id = f"toolu_r{n}_{k}"
            call = tool_block(tool_id, f"cmd {n}.{k}")
            self.block(mid, call)
            blocks.append(call)
            self.pending.append(tool_id)
            if streamed and k % 2 == 0:  # a tool that ran while the response still streamed
                output = f"early {tool_id}"
                self.user_line([{"type": "tool_result", "tool_use_id": tool_id, "content": output}])
                self.results_written.append((tool_id, output))
        self.sent.append(("assistant", content_of(blocks)))

    def boundary_step(self, words: str) -> None:
        """Claude Code compacts between turns: its marker and summary; the summary goes with the next request."""
        if self.pending or self.summary is not None:
            return
        self.event("system", None, subtype="compact_boundary", content="Compacted", compactMetadata={"trigger": "auto"})
        self.summary = f"Summary: {words}"
        self.event("user", {"role": "user", "content": self.summary}, isCompactSummary=True)
        self.lines_of_request = [self.summary]  # the reader holds it with what the next request sends

    def sidechain(self, dangling: bool, i: int) -> None:
        """An older-style sub-agent written into the same file; without blobs of its own."""
        self.prompt(f"Sub-task {i}", side=True)
        self.block(f"msg_s{i}", tool_block(f"toolu_s{i}", "look"), side=True)
        self.result(f"toolu_s{i}", "seen", side=True)
        self.block(f"msg_s{i}_end", text_block("Sub-task done."), side=True)
        if dangling:
            self.prompt(f"Sub-task {i}, once more", side=True)


def build_with_blobs(steps: list[tuple], session: str) -> BlobWriter:
    w = BlobWriter(session)
    w.request(("request", 2, True, False, 1, "blob", 0, "Start: fix the build"))
    for i, step in enumerate(steps):
        kind = step[0]
        if kind == "request":
            w.request(step)
        elif kind == "boundary":
            w.boundary_step(step[1])
        elif kind == "sidechain":
            w.sidechain(step[1], i)
        elif kind == "repeat":
            w.raw(w.lines[step[1] % len(w.lines)])  # a line written twice: a duplicate, or a retried blob
        elif kind == "junk":
            w.raw(step[1])
        elif kind == "progress":
            w.progress()
    # What is still due at the end (results no request sent yet) stays the lines it is.
    streamed = dict(w.results_written)
    for tool_id in w.pending:
        if tool_id not in streamed:
            w.user_line([{"type": "tool_result", "tool_use_id": tool_id, "content": f"out {tool_id}"}])
    w.sent += [("user", content_of(c)) for c in w.lines_of_request]
    return w
