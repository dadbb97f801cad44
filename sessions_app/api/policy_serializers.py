"""The project policy's REST shape: every setting of the engine's ``Policy``, typed strictly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args, get_origin, get_type_hints

from django.db import models
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from compaction.policy import PRESETS
from compaction.policy import Policy as EnginePolicy
from sessions_app.models import CompactionPolicy

# Typed strictly: a policy is configuration, so "0.7" or true where a number belongs is a mistake to
# report, not a value to guess at. The fields follow the engine's Policy (compaction/policy.py) and the
# model's help texts, so a new engine setting appears here by itself. The values are checked by the
# service (the model's clean: compaction.policy.validate), as in Django admin and the settings page.


class _StrictNumber(serializers.FloatField):
    default_error_messages = {"invalid_type": "A number."}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid_type")
        return super().to_internal_value(data)


class _StrictInteger(serializers.IntegerField):
    default_error_messages = {"invalid_type": "A whole number."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid_type")
        return super().to_internal_value(data)


class _StrictBoolean(serializers.BooleanField):
    default_error_messages = {"invalid_type": "true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid_type")
        return data


class _StrictString(serializers.CharField):
    default_error_messages = {"invalid_type": "A string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid_type")
        return super().to_internal_value(data)


_POLICY_SCALARS: dict[Any, type[serializers.Field]] = {
    float: _StrictNumber,
    int: _StrictInteger,
    bool: _StrictBoolean,
    str: _StrictString,
}


def _policy_field(name: str, hint: Any, *, writable: bool) -> serializers.Field:
    model_field = CompactionPolicy._meta.get_field(name)
    assert isinstance(model_field, models.Field)
    options: dict[str, Any] = {"required": False} if writable else {"read_only": True}
    if model_field.help_text:
        options["help_text"] = str(model_field.help_text)
    args = get_args(hint)
    if type(None) in args:
        # A setting that may be unset (a threshold in tokens): null clears it.
        (hint,) = (arg for arg in args if arg is not type(None))
        options["allow_null"] = True
    if hint is str and model_field.choices:
        return serializers.ChoiceField(choices=[value for value, _ in model_field.choices], **options)
    if hint is str:
        options["max_length"] = model_field.max_length
    if hint in _POLICY_SCALARS:
        return _POLICY_SCALARS[hint](**options)
    if get_origin(hint) is tuple and get_args(hint) == (str, Ellipsis):
        # Patterns are kept as written: a regular expression's spaces are part of it.
        return serializers.ListField(child=_StrictString(trim_whitespace=False), **options)
    raise TypeError(f"policy field {name}: no serializer field for {hint!r}")


def _policy_fields(*, writable: bool) -> dict[str, serializers.Field]:
    hints = get_type_hints(EnginePolicy)
    return {name: _policy_field(name, hints[name], writable=writable) for name in CompactionPolicy.ENGINE_FIELDS}


class PolicyOut(serializers.Serializer):
    """A project's compaction policy: the preset its numbers equal (or "custom") and every setting."""

    def get_fields(self) -> dict[str, serializers.Field]:
        preset = serializers.CharField(
            read_only=True, help_text=f"The preset these numbers are ({', '.join(PRESETS)}), or custom"
        )
        return {"preset": preset, **_policy_fields(writable=False)}


class PolicyPatchIn(serializers.Serializer):
    """Any of the policy's settings; ``preset`` first applies that preset (keeping ``auto`` and the
    summarizer), the other fields given then go on top. Unknown fields are refused."""

    def get_fields(self) -> dict[str, serializers.Field]:
        preset = serializers.ChoiceField(
            choices=list(PRESETS),
            required=False,
            help_text="Apply this preset's numbers (auto, summarizer_provider and summarizer_model are kept); "
            "fields given alongside go on top of it",
        )
        return {"preset": preset, **_policy_fields(writable=True)}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields), key=str)
            if unknown:
                problem = ErrorDetail("Not a policy field.", code="unknown_field")
                raise serializers.ValidationError({str(name): [problem] for name in unknown})
        return super().to_internal_value(data)
