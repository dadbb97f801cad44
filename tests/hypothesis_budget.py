"""How many examples a property test runs: a share of the Hypothesis profile's ``max_examples``
(tests/conftest.py loads ``dev``, ``ci`` or ``deep``), by what one example costs.

A test takes the settings of its kind — ``@settings(DATABASE)`` — and never a count of its own, so
one profile scales the whole suite: a quick loop at a desk, CI's budget, or a deep search."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

assert settings.default is not None  # a profile is loaded (Hypothesis's own at the least)
_PROFILE_EXAMPLES = settings.default.max_examples
_SLOW_DATA = [HealthCheck.too_slow, HealthCheck.data_too_large]

# A pure function of the engine: microseconds an example.
ENGINE = settings(max_examples=_PROFILE_EXAMPLES, deadline=None, suppress_health_check=_SLOW_DATA)
# Each example writes through the ORM; the test's fixtures (a project, its people) are shared by them.
DATABASE = settings(
    max_examples=max(3, _PROFILE_EXAMPLES // 5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, *_SLOW_DATA],
)
# Each example is a sequence of HTTP requests through the whole stack.
SERVER = settings(DATABASE, max_examples=max(2, _PROFILE_EXAMPLES // 10))
# A pure function on inputs of thousands of items.
LARGE = settings(ENGINE, max_examples=max(3, _PROFILE_EXAMPLES // 10))
