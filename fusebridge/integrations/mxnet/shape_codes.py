"""Shapes known by their parts, for save_mxnet: MXNet's Reshape takes a static list of codes
(0 copies a dim, -1 infers one, -2 copies the rest, -3 merges two, -4 splits one), while the IR
computes shapes at run time (Shape slices, Concat, Mul, ...) because ranks are not known when an
MXNet model is loaded. This module follows those computations symbolically and turns a Reshape
whose target is made of the input's own dims, literals and at most one unknown dim into codes.

A shape is a tuple of parts: a single dim (Lit, Dim, Prod, Quot) or a Run of dims of unknown
count (value.shape[start:end]). Two parts are the same dim when they are equal."""

from __future__ import annotations

from dataclasses import dataclass

import onnx_ir as ir


@dataclass(frozen=True)
class Lit:
    n: int


@dataclass(frozen=True)
class Dim:
    """Dim k of value's shape, not known otherwise."""

    value: ir.Value
    k: int


@dataclass(frozen=True)
class Run:
    """value.shape[start:end]: start >= 0, end None (to the last dim) or < 0."""

    value: ir.Value
    start: int
    end: int | None


@dataclass(frozen=True)
class Prod:
    """One dim, the product of the factors (a Run's dims all multiplied)."""

    factors: tuple


@dataclass(frozen=True)
class Quot:
    dim: object
    n: int


Shape = tuple  # of Lit | Dim | Run | Prod | Quot


def own(value: ir.Value) -> Shape:
    """A shape nothing is known about: the value's own dims."""
    return (Run(value, 0, None),)


def product(parts: Shape) -> object:
    """The parts multiplied into one dim (literal factors folded, ones dropped)."""
    factors, n = [], 1
    for p in parts:
        for f in p.factors if isinstance(p, Prod) else (p,):
            if isinstance(f, Lit):
                n *= f.n
            else:
                factors.append(f)
    if n != 1 or not factors:
        factors.append(Lit(n))
    single = len(factors) == 1 and not _is_run(factors[0])
    return factors[0] if single else Prod(tuple(factors))


def quotient(part: object, n: int) -> object:
    """part / n as one dim: a literal factor divisible by n is divided."""
    if isinstance(part, Lit) and part.n % n == 0:
        return Lit(part.n // n)
    factors = part.factors if isinstance(part, Prod) else (part,)
    for k, f in enumerate(factors):
        if isinstance(f, Lit) and f.n % n == 0:
            return product((*factors[:k], Lit(f.n // n), *factors[k + 1 :]))
    return Quot(part, n)


def _split(a: object, b: object, whole: object) -> tuple[int, int] | None:
    """MXNet's -4 codes that split `whole` into the dims a and b, if they do."""
    for x, y, swap in ((a, b, False), (b, a, True)):
        if isinstance(y, Lit) and y.n > 0 and quotient(whole, y.n) == x:
            return (y.n, -1) if swap else (-1, y.n)
    return None


_MAX_RANK = 32  # MXNet's; a slice past it is not peeled dim by dim (a crafted end of 10**9)


def _peel(run: Run) -> tuple[Dim, Run]:
    """A run's first dim and the rest (the dim is taken to exist: a Shape slice names it)."""
    return Dim(run.value, run.start), Run(run.value, run.start + 1, run.end)


def _is_run(part: object) -> bool:
    return isinstance(part, Run)


def slice_shape(shape: Shape, value: ir.Value, start: int, end: int | None) -> Shape:
    """shape[start:end] (ONNX Shape's start and end) where the parts tell it; else the slice of
    value's own dims, which is always right. A slice of unknown count stays value's own dims:
    a reshape_like that unflattens it takes them from value."""
    parts = _slice_parts(shape, value, start, end)
    if any(_is_run(p) for p in parts) and start >= 0 and (end is None or end < 0):
        return (Run(value, start, end),)
    return parts


def _slice_parts(shape: Shape, value: ir.Value, start: int, end: int | None) -> Shape:
    runs = [i for i, p in enumerate(shape) if _is_run(p)]
    if not runs:  # rank known: exact, clamped as Shape clamps
        return tuple(shape[start:end])
    parts, p = list(shape), runs[0]
    suffix = len(parts) - p - 1
    if len(runs) == 1 and 0 <= start <= _MAX_RANK and (end is None or end <= _MAX_RANK):
        while p < start or (end is not None and p < end):  # single dims up to the slice's end
            parts[p : p + 1] = _peel(parts[p])
            p += 1
        if end is None or end >= 0:
            return tuple(parts[start:end])
        if -end <= suffix:
            return tuple(parts[start:end])
        run = parts[p]
        cut = (0 if run.end is None else run.end) - (-end - suffix)
        return (*parts[start:p], Run(run.value, run.start, cut))
    if len(runs) == 1 and start < 0 and -start <= suffix and (end is None or end < 0):
        return tuple(parts[start:end])
    if end is not None and end - start == 1 and (start >= 0 or end < 0):
        return (Dim(value, start),)
    if start == -1 and end is None:
        return (Dim(value, -1),)
    return (Run(value, start, end),)


def reshape_codes(source: Shape, target: Shape) -> tuple[list[int], list[tuple[int, Run]]]:
    """MXNet Reshape codes that turn a tensor of shape `source` into `target` (ONNX's 0 and -1
    resolved), and the unflattenings left to reshape_like: (output dim, the Run it becomes),
    for each Run of unknown count in the target, which the codes make as one dim (the product
    of its dims). Raises ValueError naming a dim that codes cannot make. Each code but -2, -3
    and -4 reads one source dim, as MXNet's do."""
    src = _Source(source)
    codes: list[int] = []
    unflatten: list[tuple[int, Run]] = []
    inferred, i = False, 0
    target = list(target)
    while i < len(target):
        if _is_run(target[i]):
            if i + 1 == len(target) and src.rest() == (target[i],):
                codes.append(-2)
                break
            unflatten.append((i, target[i]))
            target[i] = product((target[i],))
        t, nxt = target[i], target[i + 1] if i + 1 < len(target) else None
        if _is_run(nxt):
            nxt = None  # made as one dim: never split off with t
        one, two = src.dims(1), src.dims(2)
        if one == (t,):
            codes += [-4, -1, 1] if nxt == Lit(1) else [0]
            i += 2 if nxt == Lit(1) else 1
            src.take(1)
        elif t == Lit(1) and nxt is not None and one == (nxt,):
            codes += [-4, 1, -1]
            i += 2
            src.take(1)
        elif nxt is not None and one is not None and (split := _split(t, nxt, one[0])):
            codes += [-4, *split]
            i += 2
            src.take(1)
        elif two is not None and product(two) == t:
            codes.append(-3)
            i += 1
            src.take(2)
        else:
            if isinstance(t, Lit) and t.n > 0:
                codes.append(t.n)
            elif not inferred:
                codes.append(-1)
                inferred = True
            else:
                raise ValueError(f"dim {i} ({_show(t)}) besides another dim inferred")
            i += 1
            src.j += 1  # MXNet reads a source dim for a literal or -1 too
    return codes, unflatten


def mxnet_steps(codes: list[int]) -> list[list[int]]:
    """The codes as MXNet 1.9 runs them right: its Reshape records a -1 at its index among the
    codes, not among the output dims, so a -1 after a -4 (3 codes, 2 dims) fills the wrong dim.
    Then the splits come in a second Reshape: the first keeps each split dim whole (0)."""
    groups, k = [], 0
    while k < len(codes):
        size = 3 if codes[k] == -4 else 1
        groups.append(codes[k : k + size])
        k += size
    splits = [g[0] == -4 for g in groups]
    heads = [g[0] for g in groups]
    if -1 not in heads or not any(splits[: heads.index(-1)]):
        return [codes]
    whole = [c for g, split in zip(groups, splits) for c in ([0] if split else g)]
    apart = [
        c for g, split in zip(groups, splits) for c in (g if split else [-2 if g[0] == -2 else 0])
    ]
    return [whole, apart]


class _Source:
    """The source shape read left to right; a Run gives its first dims as single ones."""

    def __init__(self, shape: Shape) -> None:
        self.parts = list(shape)
        self.j = 0

    def dims(self, n: int) -> tuple | None:
        """The next n source dims as single parts, without reading them (None: not there)."""
        out, k, part = [], self.j, None
        while len(out) < n:
            if part is None:
                if k >= len(self.parts):
                    return None
                part = self.parts[k]
                k += 1
            if _is_run(part):
                dim, part = _peel(part)
                out.append(dim)
            else:
                out.append(part)
                part = None
        return tuple(out)

    def take(self, n: int) -> None:
        for _ in range(n):
            if _is_run(self.parts[self.j]):
                self.parts[self.j : self.j + 1] = _peel(self.parts[self.j])
            self.j += 1

    def rest(self) -> tuple:
        return tuple(self.parts[self.j :])


def _show(part: object) -> str:
    if isinstance(part, Lit):
        return str(part.n)
    if isinstance(part, Dim):
        return f"dim {part.k} of {part.value.name!r}"
    if isinstance(part, Run):
        end = "" if part.end is None else part.end
        return f"dims [{part.start}:{end}] of {part.value.name!r}"
    if isinstance(part, Prod):
        return " * ".join(_show(f) for f in part.factors)
    return f"{_show(part.dim)} / {part.n}"
