"""What counts as a file path in free text (a tool's output, an assistant's words)."""

from __future__ import annotations

import re

# Relative or absolute, at least one directory and an extension: ``src/app.py``, ``/etc/x.conf``.
PATH_RE = re.compile(r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}\b")
