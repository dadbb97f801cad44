"""Reads: lookups scoped to what a user may see (``access``), how full a session is and STATUS
(``usage``), what the model sees (``model_context``), what a compaction did and whether it can be
reverted (``compactions``). Nothing here writes."""
