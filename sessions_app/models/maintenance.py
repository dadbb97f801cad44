"""Where a long maintenance pass over stored rows got to (``ctx redact``): a restart continues from
there, not from the first row."""

from __future__ import annotations

from django.db import models


class BackfillCursor(models.Model):
    name = models.CharField(max_length=100, unique=True, help_text="The pass and the table it walks.")
    position = models.BigIntegerField(default=0, help_text="The last primary key done.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} at {self.position}"
