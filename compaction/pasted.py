"""Tool output pasted into a user message: the parts of a user's text the reversible strategies may
condense, while the words the person typed stay verbatim (docs/COMPACTION.md, "Reversible strategies").

A person (or their harness) pastes logs, command output and stack traces into what they write. Such a
part is found four ways, each a span of whole lines (or a tag's body) inside the text:

- the body of a harness's output tag: ``<bash-stdout>``, ``<bash-stderr>``, ``<local-command-stdout>``,
  ``<local-command-stderr>``;
- a fenced block (```` ``` ```` or ``~~~``) right under a label line, or whose body reads as a log or a
  stack trace; code and prose in a fence stay;
- the lines under a label line ("Bash output:", "Here is the log:", "Stack trace:"), up to a blank line
  followed by prose, a fence or another label, unless the first of them is prose; prose lines closing
  the part stay;
- an unlabelled run of log lines (a time, a level, a ``path:line``…) or a Python traceback, long
  enough that nobody typed it.

Everything outside the spans is never changed: ``replace_spans`` splices new text into exactly those
character ranges.
"""

from __future__ import annotations

import re
from collections.abc import Callable

OUTPUT_TAGS = ("bash-stdout", "bash-stderr", "local-command-stdout", "local-command-stderr")
TAG_OPEN = re.compile(r"<(" + "|".join(OUTPUT_TAGS) + r")>")
# A line that says output follows: "Bash output:", "Here's the log:", "SIMULATION OUTPUT:", "Stack trace:".
LABEL = re.compile(
    r"^[^\S\n]*(?:[\w'’ ().,/-]{0,60}?\s)?(?:output|stdout|stderr|logs?|stack ?trace|traceback|console)"
    r"[^\S\n]*:[^\S\n]*$",
    re.IGNORECASE,
)
FENCE = re.compile(r"^[^\S\n]{0,3}(`{3,}|~{3,})[^`\n]*$")
# A line as programs write them: a time, a level, a path:line, a prompt, a test verdict, a rule, a
# frame of a stack trace. Case matters: "Info about…" is prose, "INFO" is a log's.
OUTPUT_LINE = re.compile(
    r"^(?:\s+at\s+\S|\s*(?:\[|\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}|(?:INFO|DEBUG|WARN|WARNING|ERROR|TRACE|FATAL|CRITICAL)\b|"
    r"[\w./-]+:\d+|\$ |>>> |PASSED|FAILED|={3,}|-{3,}|File \"|Traceback \(most recent call last\)))"
)
TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
FRAME = re.compile(r"^\s+at\s+\S")
SENTENCE_END = (".", "?", "!", ":", ")")
MIN_RUN_LINES = 40  # an unlabelled run shorter than this may be the person's own writing
RUN_SHARE = 0.6  # of its non-blank lines that must read as output
MAX_GAP = 2  # lines that don't read as output, inside an unlabelled run


class _Lines:
    """The text's lines with where each starts and where its content ends (before the line break)."""

    def __init__(self, text: str) -> None:
        self.text: list[str] = []
        self.start: list[int] = []
        self.end: list[int] = []
        at = 0
        for line in text.splitlines(keepends=True):
            content = line.splitlines()[0] if line.splitlines() else ""
            self.text.append(content)
            self.start.append(at)
            self.end.append(at + len(content))
            at += len(line)

    def __len__(self) -> int:
        return len(self.text)

    def span(self, first: int, last: int) -> tuple[int, int]:
        return self.start[first], self.end[last]


def _blank(line: str) -> bool:
    return not line.strip()


def _output_like(line: str) -> bool:
    return bool(OUTPUT_LINE.match(line))


def _prose(line: str) -> bool:
    """A line a person wrote: a letter first, closing like a sentence ("Thanks!", "Why does it stop?")."""
    stripped = line.strip()
    return stripped[:1].isalpha() and stripped.endswith(SENTENCE_END) and not _output_like(line)


def _boundary(line: str) -> bool:
    return bool(LABEL.match(line) or FENCE.match(line))


def _trim(lines: _Lines, first: int, last: int) -> tuple[int, int] | None:
    """The part without blank lines at its ends and without the prose lines closing it."""
    while first <= last and _blank(lines.text[first]):
        first += 1
    while first <= last and (_blank(lines.text[last]) or _prose(lines.text[last])):
        last -= 1
    return (first, last) if first <= last else None


def _fence_end(lines: _Lines, at: int) -> int:
    """The index of the line closing the fence opened at ``at`` (``len(lines)`` when none does)."""
    opener = FENCE.match(lines.text[at])
    assert opener is not None
    mark = opener.group(1)
    closing = re.compile(r"^[^\S\n]{0,3}" + re.escape(mark[0]) + "{" + str(len(mark)) + r",}[^\S\n]*$")
    for j in range(at + 1, len(lines)):
        if closing.match(lines.text[j]):
            return j
    return len(lines)


def _labelled_end(lines: _Lines, first: int) -> int:
    """The index after the last line of the unfenced part under a label starting at ``first``."""
    j = first
    while j < len(lines):
        line = lines.text[j]
        if j > first and _boundary(line):
            return j
        if _blank(line):
            following = next((k for k in range(j + 1, len(lines)) if not _blank(lines.text[k])), len(lines))
            if following == len(lines) or _boundary(lines.text[following]) or _prose(lines.text[following]):
                return j
            j = following  # the blank lines between are the part's
            continue
        j += 1
    return j


def _run(lines: _Lines, first: int) -> tuple[int, int]:
    """An unlabelled run from ``first`` (a line that reads as output): its last line that does, and the
    index where the scan stopped. A traceback runs over its indented lines."""
    last, gap, j = first, 0, first + 1
    in_trace = bool(TRACEBACK.match(lines.text[first]))
    while j < len(lines):
        line = lines.text[j]
        if _boundary(line):
            break
        if _output_like(line) or (in_trace and line[:1] in (" ", "\t") and line.strip()):
            last, gap = j, 0
            in_trace = in_trace or bool(TRACEBACK.match(line))
        else:
            gap += 1
            in_trace = False
            if gap > MAX_GAP:
                break
        j += 1
    return last, last + 1


def _reads_as_output(lines: _Lines, first: int, last: int) -> bool:
    """Whether lines ``first``..``last`` are a stack trace, or a log long enough that nobody typed it."""
    filled = [line for line in lines.text[first : last + 1] if not _blank(line)]
    if any(TRACEBACK.match(line) for line in filled) or sum(1 for line in filled if FRAME.match(line)) >= 5:
        return len(filled) >= 4
    outputs = sum(1 for line in filled if _output_like(line))
    return len(filled) >= MIN_RUN_LINES and outputs >= RUN_SHARE * len(filled)


def _line_spans(text: str) -> list[tuple[int, int]]:
    lines = _Lines(text)
    spans: list[tuple[int, int]] = []
    label_at = -10  # the index of the newest label line
    i = 0
    while i < len(lines):
        line = lines.text[i]
        if FENCE.match(line):
            end = _fence_end(lines, i)
            body = lines.text[i + 1 : end]
            labelled = all(_blank(b) for b in lines.text[label_at + 1 : i]) and label_at >= 0
            if body and (labelled or _reads_as_output(lines, i + 1, end - 1)):
                part = _trim(lines, i + 1, end - 1)
                if part:
                    spans.append(lines.span(*part))
            label_at, i = -10, end + 1
        elif LABEL.match(line):
            label_at = i
            following = next((k for k in range(i + 1, len(lines)) if not _blank(lines.text[k])), None)
            if following is not None and FENCE.match(lines.text[following]):
                i = following  # the fence under the label is the part
                continue
            end = _labelled_end(lines, i + 1)
            part = _trim(lines, i + 1, end - 1)
            if part and not _prose(lines.text[part[0]]):
                spans.append(lines.span(*part))
                i = max(end, i + 1)
            else:  # output does not open with a sentence: the person's words, read line by line
                i += 1
        elif _output_like(line):
            last, after = _run(lines, i)
            if _reads_as_output(lines, i, last):
                spans.append(lines.span(i, last))
            i = after
        else:
            i += 1
    return spans


def pasted_spans(text: str) -> list[tuple[int, int]]:
    """The character ranges of ``text`` that hold pasted output, in order, none overlapping."""
    tags = _tag_bodies(text)
    lines = [(s, e) for s, e in _line_spans(text) if not any(s < t_end and t_start < e for t_start, t_end in tags)]
    return sorted([*tags, *lines])


def _tag_bodies(text: str) -> list[tuple[int, int]]:
    """The non-blank bodies of the harness's output tags. A tag nobody closes has none, and once a
    closing tag is missing after one opening, it is after every later one too (linear, not quadratic)."""
    bodies: list[tuple[int, int]] = []
    unclosed: set[str] = set()
    at = 0
    while (opening := TAG_OPEN.search(text, at)) is not None:
        name = opening.group(1)
        close = -1 if name in unclosed else text.find(f"</{name}>", opening.end())
        if close < 0:
            unclosed.add(name)
            at = opening.end()
            continue
        if text[opening.end() : close].strip():
            bodies.append((opening.end(), close))
        at = close + len(name) + 3
    return bodies


def replace_spans(text: str, spans: list[tuple[int, int]], replace: Callable[[str], str | None]) -> str | None:
    """``text`` with each span's text replaced by what ``replace`` makes of it (None: kept), or None
    when nothing changed. The text outside the spans is copied as it is."""
    out: list[str] = []
    at, changed = 0, False
    for start, end in spans:
        new = replace(text[start:end])
        if new is None:
            continue
        out += [text[at:start], new]
        at, changed = end, True
    out.append(text[at:])
    return "".join(out) if changed else None
