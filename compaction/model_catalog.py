"""Models' windows, output limits and prices. Windows and prices per kind of token come from the
genai-prices package's bundled snapshot (a maintained data package, pinned; it is never updated at
run time). What it does not know is a small overlay here: max output tokens, input caps smaller than
the window (GPT-5's 272,000 of 400,000), which models take a 1M-token window when asked (a ``[1m]``
suffix, Anthropic's ``context-1m`` beta), calibration. The database's ModelProfile rows win over
both, field by field (``sessions_app.selectors.usage``); an unknown model falls back to
``FALLBACK_CONTEXT_WINDOW`` tokens, and STATUS warns."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from compaction import model_package
from compaction.model_prices import TokenPrices

FALLBACK_CONTEXT_WINDOW = 128_000
FALLBACK_MAX_OUTPUT = 8_192
LONG_CONTEXT_WINDOW = 1_000_000
# Claude Code names a model asked for with the 1M-token window so: claude-opus-4-7[1m].
LONG_CONTEXT_SUFFIX = "[1m]"

# Claude counts come to more than cl100k's: see docs/TOKEN_COUNTING.md for how CLAUDE_CALIBRATION
# was measured on real Claude Code transcripts.
CLAUDE_CALIBRATION = 1.32


@dataclass(frozen=True)
class ModelSpec:
    name: str  # the package's id of the model (a dated or aliased name resolves to it), or the name asked
    provider: str
    context_window: int  # what the provider takes in all
    max_output_tokens: int
    calibration: float = 1.0
    input_cap: int | None = None  # the most input it takes, when less than the window
    prices: TokenPrices | None = None

    @property
    def input_window(self) -> int:
        """The window a request's input must fit: the context window, or the input cap if smaller."""
        return min(self.context_window, self.input_cap or self.context_window)


@dataclass(frozen=True)
class ModelFamily:
    """What the members of a family have in common that the package does not say: max output tokens,
    an input cap, calibration, and the window to assume for a member the package does not know."""

    pattern: str  # matched against the start of the canonical name
    provider: str
    context_window: int
    max_output_tokens: int
    calibration: float = 1.0
    input_cap: int | None = None


# Tried in order, the first match wins. Claude's max output is the smallest of its current models,
# so the reserve is never too small; a model's own figure (MAX_OUTPUT) wins.
MODEL_FAMILIES: tuple[ModelFamily, ...] = (
    ModelFamily(r"claude(-|$)", "anthropic", 200_000, 32_000, CLAUDE_CALIBRATION),
    # OpenAI's GPT-5 models take 272,000 input tokens of their 400,000 (the rest is for the reply).
    ModelFamily(r"gpt-5([.-]|$)", "openai", 400_000, 128_000, input_cap=272_000),
    ModelFamily(r"gpt-4\.1([.-]|$)", "openai", 1_047_576, 32_768),
    ModelFamily(r"gpt-4o([.-]|$)", "openai", 128_000, 16_384),
    ModelFamily(r"o[34]([.-]|$)", "openai", 200_000, 100_000),
)

# Max output tokens by model (a dated version matches its model), where the family's is not it.
MAX_OUTPUT: dict[str, int] = {
    "claude-opus-4-7": 128_000,
    "claude-opus-4-5": 64_000,
    "claude-sonnet-4-5": 64_000,
    "claude-haiku-4-5": 64_000,
    "claude-sonnet-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-3-5-sonnet": 8_192,
    "claude-3-5-haiku": 8_192,
    "claude-3-opus": 4_096,
    "claude-3-haiku": 4_096,
    "gpt-4o-mini": 16_384,
    "gpt-4-turbo": 4_096,
    "gpt-4": 8_192,
}

# Models that take a 1M-token window when asked for it although the package gives their standard
# one and no long-context price (Anthropic's context-1m beta on Claude Sonnet 4).
LONG_CONTEXT_MODELS: tuple[str, ...] = ("claude-sonnet-4",)


def long_context_asked(name: str) -> bool:
    return name.strip().lower().endswith(LONG_CONTEXT_SUFFIX)


def without_long_context(name: str) -> str:
    bare = name.strip()
    return bare[: -len(LONG_CONTEXT_SUFFIX)] if long_context_asked(bare) else bare


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


def spec_for(name: str) -> ModelSpec | None:
    """What the package and the overlay know of a model (a dated version, an alias, a provider
    prefix: the package's own matching), else of its family, else None. ``[1m]`` at the end asks
    for the 1M-token window, which the model gets when it has one."""
    return _spec(canonical_model_name(without_long_context(name)), long_context_asked(name))


def prices_on(name: str, day: date) -> TokenPrices | None:
    """The package's prices of ``name`` on ``day`` (``spec_for``'s matching); None where the package
    doesn't know the model (a family's figures have no dates)."""
    return model_package.package_prices_on(canonical_model_name(without_long_context(name)), day)


@lru_cache(maxsize=1024)
def _spec(bare: str, long_context: bool) -> ModelSpec | None:
    family = next((f for f in MODEL_FAMILIES if re.match(f.pattern, bare)), None)
    known = model_package.package_model(bare)
    if known is None and family is None:
        return None
    calibration = family.calibration if family else (CLAUDE_CALIBRATION if bare.startswith("claude") else 1.0)
    output_match = best_match(bare, tuple(MAX_OUTPUT))
    max_output = MAX_OUTPUT[output_match] if output_match else family.max_output_tokens if family else None
    if known is None:
        assert family is not None
        return ModelSpec(
            bare,
            family.provider,
            family.context_window,
            max_output or FALLBACK_MAX_OUTPUT,
            calibration,
            family.input_cap,
        )
    window = known.context_window or (family.context_window if family else FALLBACK_CONTEXT_WINDOW)
    if long_context and (known.long_context or best_match(bare, LONG_CONTEXT_MODELS)):
        window = max(window, LONG_CONTEXT_WINDOW)
    return ModelSpec(
        name=known.name,
        provider=known.provider,
        context_window=window,
        max_output_tokens=min(max_output or FALLBACK_MAX_OUTPUT, window),
        calibration=calibration,
        input_cap=family.input_cap if family else None,
        prices=known.prices,
    )
