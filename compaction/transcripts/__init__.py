"""Readers that turn recorded agent transcripts into ctxweb's canonical messages.

Formats (``FORMATS``), one module each:

- ``claude-code`` (``claude_code``): Claude Code's JSONL session files, read incrementally
  (``ClaudeCodeReader``). It keeps FILE ORDER and does not prune rewound branches: a hook uploads the
  file a few lines at a time, and an incremental reader cannot know that a branch will be abandoned
  later, so the one-shot import does exactly what the incremental one does (lines carry
  ``parent_uuid`` in metadata for whoever wants the tree).
- ``openai`` (``openai``): OpenAI chat messages, SWE-agent trajectories, tau-bench episodes.
- ``anthropic`` (``anthropic``): Anthropic Messages API requests.

``base`` holds what they share (the result types, the canonical message); ``claude_code_lines`` what
single Claude Code lines say (a response's lines, a request blob); ``formats`` maps a format's name to
its reader. Imports run one way: ``base`` ← the readers ← ``formats`` ← this package.
"""

from .base import Conversation, ResponseUsage, Transcript, TranscriptError, UsagePoint
from .claude_code import ClaudeCodeReader
from .formats import FORMATS, read_transcript

__all__ = [
    "FORMATS",
    "ClaudeCodeReader",
    "Conversation",
    "ResponseUsage",
    "Transcript",
    "TranscriptError",
    "UsagePoint",
    "read_transcript",
]
