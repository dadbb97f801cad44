"""``{{ text|highlight:terms }}``: the text escaped, each of a search's terms in ``<mark>`` (the page a
search hit links to, ``?q=``)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString, mark_safe

from compaction.search_text import mark_terms

register = template.Library()


@register.filter
def highlight(text: str, terms: list[str] | None) -> str | SafeString:
    if not terms:
        return text  # escaped by the template, as any value
    return mark_safe(mark_terms(text, terms))  # escaped by mark_terms
