"""The identifiers a text mentions that outlive its clearing: file paths and error lines.

One definition for the engine: a cleared output keeps them under its placeholder
(``reversible.cleared``) and the offline summary lists paths from them (``extractive``).
"""

from __future__ import annotations

import re

# A relative or absolute path with at least one directory and an extension, or a URL to a file.
# The look-behind starts a match only where a word starts, which also keeps a long run of word
# characters without a slash (base64, minified code) linear to scan.
PATH_RE = re.compile(r"(?<![\w/.-])(?:[A-Za-z][\w+.-]*://)?(?:\.{0,2}/)?(?:[\w.-]+/+)+[\w.-]+\.\w+")
# Lines that report a failure, whatever the policy's preserve patterns say.
ERROR_RE = re.compile(r"error|fail|fatal|critical|exception|traceback|panic", re.IGNORECASE)


def file_paths(text: str) -> list[str]:
    """The distinct paths in ``text``, in order of first mention; a path that ends another one found
    (``lib/a.py`` beside ``/repo/lib/a.py``) is left out: the longer one says it."""
    found = list(dict.fromkeys(PATH_RE.findall(text)))
    ends: set[str] = set()  # every path found so far and each of its tails after a slash
    kept = set()
    for path in sorted(found, key=len, reverse=True):
        if path in ends:
            continue
        kept.add(path)
        parts = path.split("/")
        ends.update("/".join(parts[i:]) for i in range(len(parts)))
    return [p for p in found if p in kept]
