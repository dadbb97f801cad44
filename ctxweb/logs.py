"""``CTX_LOG_FORMAT=json``: one JSON object a line — time, level, logger, message, and the figures a
log call passes in ``extra`` (``event``, ``session``, ``tokens_before``, …) as keys of their own."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# What every LogRecord carries; anything else on a record came from ``extra``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)
