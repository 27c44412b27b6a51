"""What a pipeline did: per rule, how often it fired and why it refused where it came close."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RuleReport:
    rule: str
    fired: int
    refusals: tuple[tuple[str, str], ...]  # (node, reason)


@dataclasses.dataclass(frozen=True)
class OptimizeReport:
    pipeline: str
    rules: tuple[RuleReport, ...]

    def fired(self, rule: str) -> int:
        return next(r.fired for r in self.rules if r.rule == rule)

    def refusals(self, rule: str) -> tuple[tuple[str, str], ...]:
        return next(r.refusals for r in self.rules if r.rule == rule)

    def text(self) -> str:
        width = max((len(r.rule) for r in self.rules), default=0)
        lines = [f"pipeline {self.pipeline}:"]
        for r in self.rules:
            lines.append(f"  {r.rule:<{width}}  fired {r.fired}")
            lines += [f"  {'':<{width}}  refused at {node!r}: {why}" for node, why in r.refusals]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()
