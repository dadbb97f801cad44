"""``{{ text|highlight:terms }}``: the text escaped, each of a search's terms in ``<mark>`` (the page a
search hit links to, ``?q=``)."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

register = template.Library()


@register.filter
def highlight(text: str, terms: list[str] | None) -> str | SafeString:
    if not terms:
        return text  # escaped by the template, as any value
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.I)
    out, at = [], 0
    for match in pattern.finditer(text):
        out += [escape(text[at : match.start()]), "<mark>", escape(match.group(0)), "</mark>"]
        at = match.end()
    out.append(escape(text[at:]))
    return mark_safe("".join(out))  # every piece escaped above
