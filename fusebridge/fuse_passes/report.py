"""What passes did: one PassReport per pass (every pass, rules and the others alike), and an
OptimizeReport for a pipeline, the reports of its passes in the order they ran."""

from __future__ import annotations

import dataclasses

from fusebridge.errors import ArgumentError


@dataclasses.dataclass(frozen=True)
class PassReport:
    name: str
    changed: bool
    # Places rewritten (a rule's firings, dropouts given a stream, ops lowered); None for a
    # pass that counts nothing (shape inference, a check).
    fired: int | None = None
    refusals: tuple[tuple[str, str], ...] = ()  # (node, why it was left alone)
    notes: tuple[str, ...] = ()  # what was done where, one line each

    def lines(self, width: int) -> list[str]:
        """The report as text lines, the pass name padded to `width`."""
        if self.fired is not None:
            what = f"fired {self.fired}"
        else:
            what = "changed" if self.changed else "unchanged"
        pad = " " * width
        return [
            f"  {self.name:<{width}}  {what}",
            *(f"  {pad}  refused at {node!r}: {why}" for node, why in self.refusals),
            *(f"  {pad}  {note}" for note in self.notes),
        ]


@dataclasses.dataclass(frozen=True)
class OptimizeReport:
    pipeline: str
    passes: tuple[PassReport, ...]

    def get(self, name: str) -> PassReport:
        for report in self.passes:
            if report.name == name:
                return report
        raise ArgumentError(
            f"pipeline {self.pipeline!r} has no pass {name!r}; its passes are "
            f"{[r.name for r in self.passes]}"
        )

    def fired(self, name: str) -> int | None:
        return self.get(name).fired

    def refusals(self, name: str) -> tuple[tuple[str, str], ...]:
        return self.get(name).refusals

    def text(self) -> str:
        width = max((len(r.name) for r in self.passes), default=0)
        lines = [f"pipeline {self.pipeline}:"]
        for report in self.passes:
            lines += report.lines(width)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()
