"""How close the offline estimate comes to Claude's own counts, on recorded Claude Code transcripts.

    .venv/bin/python bench/calibrate.py [FILES …]      (default: $CTX_SHARED_DATA or ../shared/data, claude_code/)
    .venv/bin/python bench/calibrate.py --fit           (also search the framing constants)

For every file: the context growth between consecutive recorded requests (Claude's ``usage``) against
our estimate of the messages in between — raw cl100k, and with the shipped framing and
``CLAUDE_CALIBRATION``. Then the total over all files, the per-file spread, and a leave-one-file-out
check (the factor fitted without the file it is judged on). See docs/TOKEN_COUNTING.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compaction.calibration import (
    Sample,
    fit_factor,
    fit_framing,
    growth_steps,
    leave_one_out,
    total_error,
)
from compaction.model_catalog import CLAUDE_CALIBRATION
from compaction.tokens import DEFAULT_FRAMING, Framing
from compaction.transcripts import read_transcript

DEFAULT_GLOB = (
    Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data") / "claude_code"
)
RAW = Framing(request=0, message=0, block=0, tool_use=0, tool_result=0, tool_definition=0)


def load_samples(paths: list[Path]) -> list[Sample]:
    samples = []
    for path in paths:
        transcript = read_transcript(path.read_bytes(), "claude-code")
        steps = [step for conversation in transcript.conversations for step in growth_steps(conversation)]
        if steps:  # a file with fewer than two requests measures nothing
            samples.append(Sample.of(path.name, steps))
    return samples


def source_of(filename: str) -> str:
    """'spotter_sub_…' → 'spotter': the repository a shared transcript came from."""
    prefix = filename.split("_", 1)[0]
    return "reliab" if prefix == "claude-reliability" else prefix


def spread(errors: list[float]) -> str:
    absolute = sorted(abs(e) for e in errors)
    p90 = absolute[min(len(absolute) - 1, int(0.9 * len(absolute)))]
    return f"median |error| {statistics.median(absolute):.1%}, 90th percentile {p90:.1%}, max {absolute[-1]:.1%}"


def report(samples: list[Sample], framing: Framing, factor: float, title: str) -> None:
    errors = [s.error(framing, factor) for s in samples]
    loo = leave_one_out(samples, framing)
    actual = sum(s.actual for s in samples)
    loo_total = sum((1 + e) * s.actual for s, e in loo)  # each file's estimate with the factor fitted on the others
    print(f"\n{title}: framing message={framing.message} block={framing.block}, factor {factor:.3f}")
    print(
        f"  total growth: estimate {sum(s.estimate(framing, factor) for s in samples):,.0f} vs recorded {actual:,}"
        f" → error {total_error(samples, framing, factor):+.1%}"
    )
    print(f"  per file: {spread(errors)}")
    print(f"  leave-one-file-out: total error {loo_total / actual - 1:+.1%}; per file: {spread([e for _, e in loo])}")
    # Files from one source repository resemble each other; hold out a whole source at a time.
    sources: dict[str, list[Sample]] = {}
    for s in samples:
        sources.setdefault(source_of(s.name), []).append(s)
    held = []
    for name, members in sorted(sources.items()):
        rest = [s for s in samples if s not in members]
        if rest:
            est = sum(s.estimate(framing, fit_factor(rest, framing)) for s in members)
            held.append(f"{name} {est / sum(s.actual for s in members) - 1:+.1%}")
    print(f"  leave-one-source-out (total error of the held-out source): {', '.join(held)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--fit", action="store_true", help="grid-search the per-message and per-block framing")
    args = parser.parse_args()
    paths = args.files or sorted(DEFAULT_GLOB.glob("*.jsonl"))
    if not paths:
        print(f"no transcripts given and none at {DEFAULT_GLOB}", file=sys.stderr)
        return 2
    samples = load_samples(paths)
    print(
        f"{len(samples)} files with at least one measurable step (of {len(paths)}), "
        f"{sum(s.actual for s in samples):,} recorded tokens of growth\n"
    )
    print(f"{'file':52} {'recorded':>9} {'raw':>6} {'shipped':>8}")
    for s in samples:
        print(
            f"{s.name[:52]:52} {s.actual:9,} {s.estimate(RAW) / s.actual:6.2f} "
            f"{s.estimate(DEFAULT_FRAMING, CLAUDE_CALIBRATION) / s.actual:8.2f}"
        )
    report(samples, RAW, fit_factor(samples, RAW), "raw cl100k, factor fitted")
    report(samples, DEFAULT_FRAMING, CLAUDE_CALIBRATION, "shipped (compaction/tokens.py, compaction/model_catalog.py)")
    if args.fit:
        framing, factor = fit_framing(samples, DEFAULT_FRAMING)
        report(samples, framing, factor, "best framing on these files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
