"""Known models and their context windows. The database's ModelProfile rows start from this table
and win over it; an unknown model falls back to ``FALLBACK_CONTEXT_WINDOW`` tokens, and STATUS warns."""

from __future__ import annotations

import re
from dataclasses import dataclass

FALLBACK_CONTEXT_WINDOW = 128_000
FALLBACK_MAX_OUTPUT = 8_192


@dataclass(frozen=True)
class ModelSpec:
    name: str
    provider: str
    context_window: int
    max_output_tokens: int
    calibration: float = 1.0


# Claude counts come to more than cl100k's: see docs/TOKEN_COUNTING.md for how CLAUDE_CALIBRATION
# was measured on real Claude Code transcripts.
CLAUDE_CALIBRATION = 1.32

KNOWN_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("claude-opus-4-5", "anthropic", 200_000, 64_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-sonnet-4-5", "anthropic", 200_000, 64_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-haiku-4-5", "anthropic", 200_000, 64_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-opus-4-1", "anthropic", 200_000, 32_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-opus-4", "anthropic", 200_000, 32_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-sonnet-4", "anthropic", 200_000, 64_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-3-7-sonnet", "anthropic", 200_000, 64_000, CLAUDE_CALIBRATION),
    ModelSpec("claude-3-5-sonnet", "anthropic", 200_000, 8_192, CLAUDE_CALIBRATION),
    ModelSpec("claude-3-5-haiku", "anthropic", 200_000, 8_192, CLAUDE_CALIBRATION),
    ModelSpec("claude-3-opus", "anthropic", 200_000, 4_096, CLAUDE_CALIBRATION),
    ModelSpec("claude-3-haiku", "anthropic", 200_000, 4_096, CLAUDE_CALIBRATION),
    ModelSpec("gpt-4o", "openai", 128_000, 16_384),
    ModelSpec("gpt-4o-mini", "openai", 128_000, 16_384),
    ModelSpec("gpt-4.1", "openai", 1_047_576, 32_768),
    ModelSpec("gpt-4.1-mini", "openai", 1_047_576, 32_768),
    ModelSpec("gpt-4-turbo", "openai", 128_000, 4_096),
    ModelSpec("gpt-4", "openai", 8_192, 8_192),
    ModelSpec("gpt-5", "openai", 400_000, 128_000),
    ModelSpec("gpt-5-mini", "openai", 400_000, 128_000),
    ModelSpec("o3", "openai", 200_000, 100_000),
    ModelSpec("o4-mini", "openai", 200_000, 100_000),
)


def canonical_model_name(name: str) -> str:
    """'anthropic/claude-3.5-sonnet' → 'claude-3-5-sonnet'; provider prefixes and dots in versions go."""
    bare = name.strip().lower().rsplit("/", 1)[-1]
    if bare.startswith("claude"):
        bare = bare.replace(".", "-")
    return bare


def best_match(name: str, candidates: list[str] | tuple[str, ...]) -> str | None:
    """The longest candidate that is the model name or a dash-separated prefix of it
    ('claude-sonnet-4-5-20250929' → 'claude-sonnet-4-5')."""
    bare = canonical_model_name(name)
    hits = [c for c in candidates if bare == c or bare.startswith(c + "-")]
    return max(hits, key=len) if hits else None


# A ModelProfile name ending in this matches every model whose canonical name starts with the rest.
PATTERN_MARK = "*"


def profile_match(name: str, profiles: list[str] | tuple[str, ...]) -> str | None:
    """The ModelProfile row a model's numbers come from, among the rows' ``profiles`` names: the row
    named exactly like the model; else the longest of the named rows it is a dated version of
    (``best_match``) and the patterns (``claude-sonnet-*``) whose prefix starts its name. A named row
    wins a tie with a pattern of the same length."""
    bare = canonical_model_name(name)
    if bare in profiles:
        return bare
    ranked = [(len(p) - len(PATTERN_MARK), 0, p) for p in profiles if is_pattern(p) and bare.startswith(p[:-1])]
    named = best_match(name, [p for p in profiles if not is_pattern(p)])
    if named:
        ranked.append((len(named), 1, named))
    return max(ranked)[2] if ranked else None


def is_pattern(profile_name: str) -> bool:
    return profile_name.endswith(PATTERN_MARK)


def profile_name_problem(profile_name: str) -> str:
    """What is wrong with a ModelProfile name used as a pattern, or ''. A pattern is one prefix then
    ``*``, written as model names are compared (lower case, Claude versions with dashes), or it could
    never match."""
    if PATTERN_MARK not in profile_name:
        return ""
    prefix = profile_name[: -len(PATTERN_MARK)]
    if not is_pattern(profile_name) or PATTERN_MARK in prefix:
        return "A pattern is a prefix followed by one * at the end, e.g. claude-sonnet-*."
    canonical = canonical_model_name(prefix)
    if not canonical:
        return "A pattern needs a prefix before the *; it would match every model."
    if canonical != prefix:
        return f"Write the prefix as model names are compared: {canonical + PATTERN_MARK!r}."
    return ""


@dataclass(frozen=True)
class ModelFamily:
    """Models the table doesn't name but whose family it knows: what its members have in common."""

    pattern: str  # matched against the start of the canonical name
    provider: str
    context_window: int
    max_output_tokens: int
    calibration: float = 1.0

    def spec(self, name: str) -> ModelSpec:
        return ModelSpec(name, self.provider, self.context_window, self.max_output_tokens, self.calibration)


# Tried in order, after the named models: a bare or newer name of a known family ("claude-opus",
# "claude-sonnet-5", "gpt-5.2") gets its family's window and calibration, not the 128,000 fallback.
# Claude's max output is the smallest of its current models, so the reserve is never too small.
MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(r"claude(-|$)", "anthropic", 200_000, 32_000, CLAUDE_CALIBRATION),
    ModelFamily(r"gpt-5([.-]|$)", "openai", 400_000, 128_000),
    ModelFamily(r"gpt-4\.1([.-]|$)", "openai", 1_047_576, 32_768),
    ModelFamily(r"gpt-4o([.-]|$)", "openai", 128_000, 16_384),
    ModelFamily(r"o[34]([.-]|$)", "openai", 200_000, 100_000),
)


def spec_for(name: str) -> ModelSpec | None:
    """A named model (or a dated version of one), else a member of a known family, else None."""
    by_name = {spec.name: spec for spec in KNOWN_MODELS}
    match = best_match(name, tuple(by_name))
    if match:
        return by_name[match]
    bare = canonical_model_name(name)
    family = next((f for f in MODEL_FAMILIES if re.match(f.pattern, bare)), None)
    return family.spec(bare) if family else None
