"""Budgets in Django admin: saved and deleted through ``services.budgets``, so the period's flags and
the cached "has budgets" follow what an admin changed."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from sessions_app.errors import InvalidInput
from sessions_app.models import Budget
from sessions_app.services import budgets


class BudgetAdminForm(forms.ModelForm):
    """A key budget's key must be a project member's, as the API requires: the project's members read
    the key's prefix and name in the budget."""

    class Meta:
        model = Budget
        fields = ["project", "api_key", "period", "limit_usd", "refuse"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        project, key = data.get("project"), data.get("api_key")
        if project is not None and key is not None:
            try:
                budgets.budget_key_check(project, key.pk)
            except InvalidInput as exc:
                self.add_error("api_key", exc.detail)
        return data


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    form = BudgetAdminForm
    list_display = [
        "__str__",
        "project",
        "api_key",
        "period",
        "limit_usd",
        "refuse",
        "warned_period",
        "exceeded_period",
    ]
    list_filter = ["period", "refuse"]
    search_fields = ["project__name", "api_key__prefix", "api_key__name"]
    readonly_fields = ["warned_period", "exceeded_period", "created_at"]
    raw_id_fields = ["api_key"]

    def save_model(self, request: HttpRequest, obj: Budget, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        budgets.budget_changed(budget=obj)

    def delete_model(self, request: HttpRequest, obj: Budget) -> None:
        budgets.budget_delete(budget=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Budget]) -> None:
        for budget in queryset:
            budgets.budget_delete(budget=budget)
