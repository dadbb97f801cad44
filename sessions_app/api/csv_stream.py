"""CSV downloads: a cell a spreadsheet would run as a formula is quoted, and a long table is written
row by row as the response streams, never held whole in memory."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.http import StreamingHttpResponse


class _Line:
    """A file-like object whose ``write`` hands back what it was given: ``csv.writer`` then yields
    each row's text instead of buffering it."""

    def write(self, text: str) -> str:
        return text


def csv_cell(value: Any) -> str:
    if value is None:
        return ""
    text = str(value)
    # A spreadsheet runs a cell that starts like a formula; key names and models are anyone's text.
    return f"'{text}" if isinstance(value, str) and text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def csv_writer(out: Any) -> Any:
    """CRLF line ends, as RFC 4180 has them: the writer then quotes a cell holding a bare carriage
    return, which with LF line ends would end the row there (and start the next with the cell's rest,
    a formula a spreadsheet runs)."""
    return csv.writer(out, lineterminator="\r\n")


def csv_lines(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The header, then one line per row: its ``columns`` in order."""
    writer = csv_writer(_Line())
    yield writer.writerow(columns)
    for row in rows:
        yield writer.writerow([csv_cell(row[name]) for name in columns])


def csv_download(filename: str, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(csv_lines(columns, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
