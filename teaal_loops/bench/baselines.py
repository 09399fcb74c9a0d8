"""The baselines of a case, measured exactly as the generated kernels are
(:mod:`teaal_loops.bench.sides`).

``best_cusparse``
    the strongest cuSPARSE a CuPy user can reach (:mod:`teaal_loops.bench.cusparse`):
    descriptors and buffers made once per copy of the inputs; every algorithm run once with
    its output poisoned and checked against the case's reference (a wrong one never wins),
    then timed (queued and per call, :data:`CHOICE_REPS` repetitions each) and the fastest
    queued kept; the winner then timed three ways like every generated kernel and replayed
    from CUDA graphs. The record says which algorithm won, whether cuSPARSE's preprocessing
    ran (nvmath-python installed) and why not, and which library ran (SDDMM: nvmath-python's
    cuSPARSE, else ``torch.sparse.sampled_addmm``).
``second_side``
    the one-line call a user would write first (cupyx ``A @ x`` / ``A @ B``; for SDDMM,
    PyTorch's ``sampled_addmm`` where nvmath-python runs the best), timed the same way.

The factories (:func:`make_spmv` and so on) are the only places that build baselines, so a
test can replace them with stand-ins that run without a GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from teaal_loops.bench import cusparse, records, sides
from teaal_loops.bench.cusparse.choice import time_algorithms
from teaal_loops.bench.cusparse.sddmm import backends as sddmm_backends

CHOICE_REPS = 10


def make_spmv(A: Any, x: Any, y: Any) -> Any:
    return cusparse.SpMV(A, x=x, y=y)


def make_spmm(A: Any, n: int, B: Any, C: Any) -> Any:
    return cusparse.SpMM(A, n, B=B, C=C)


def make_sddmm(C: Any, k: int, A: Any, B: Any, out: Any) -> Any:
    return cusparse.make_sddmm(C, k, A=A, B=B, out=out)


def make_torch_sddmm(C: Any, k: int, A: Any, B: Any, out: Any) -> Any:
    return cusparse.TorchSDDMM(C, k, A=A, B=B, out=out)


def libraries() -> dict[str, Any]:
    """What runs the baselines here: CuPy's cuSPARSE binding, nvmath-python (preprocessing,
    SDDMM, graph capture), PyTorch (SDDMM fallback), each ``True`` or the one-line reason."""
    out: dict[str, Any] = {}
    for name, check in (("cupy", cusparse.cupy_binding_available),
                        ("nvmath", cusparse.nvmath_available),
                        ("torch", cusparse.torch_available)):
        try:
            got = check()
            out[name] = True if got else got.reason
        except Exception as exc:  # an availability probe must never stop a benchmark
            out[name] = sides.first_line(exc)
    out["preprocess"] = ("runs (nvmath-python's cusparseSpMV/SpMM/SDDMM_preprocess)"
                         if out["nvmath"] is True else f"not run: {out['nvmath']}")
    out["sddmm"] = sddmm_used()
    return out


def sddmm_used() -> str | None:
    """``nvmath`` or ``torch``: the SDDMM baseline :func:`make_sddmm` builds; None: none."""
    try:
        used = sddmm_backends().get("used")
    except Exception:
        return None
    return str(used) if used else None


def best_cusparse(
    timer: Any,
    bases: Sequence[Any],
    operands: Sequence[tuple[Any, ...]],
    check: sides.Check,
    *,
    reps: int,
    warmup: int,
    nbytes: int,
    copy_gbps: float,
) -> dict[str, Any]:
    """The record of the best algorithm of ``bases`` (one baseline per copy, each launched
    on its ``operands``, the last operand being the output); module docstring."""
    b0, ops0 = bases[0], operands[0]
    k = len(bases)
    validity: dict[str, dict[str, Any]] = {}
    for algorithm in b0.algorithms:
        try:
            ops0[-1].fill(math.nan)
            b0.launch(*ops0, algorithm=algorithm)
            validity[algorithm.label] = check(ops0[-1])
        except Exception as exc:  # refused for this matrix: never the winner
            validity[algorithm.label] = {"valid": False, "error": sides.first_line(exc)}
    invalid = [label for label, v in validity.items() if not v.get("valid")]
    choice = time_algorithms(
        timer, b0.algorithms,
        lambda a: (lambda i: bases[i % k].launch(*operands[i % k], algorithm=a)),
        reps=min(reps, CHOICE_REPS), warmup=max(warmup, k), invalid=invalid,
    )
    record: dict[str, Any] = {
        "baseline": b0.describe(),
        "library": _library(b0),
        "algorithms": [{**t, "check": validity.get(t["label"])}
                       for t in choice.as_dict()["algorithms"]],
        "winner": choice.winner,
        "decided_by": choice.by,
        "skipped": dict(getattr(b0, "skipped", {})),
        "preprocess": preprocess_status(b0, choice.winner),
    }
    if choice.winner is None:
        record["error"] = "no cuSPARSE algorithm gave a result within the bound"
        return record
    for b in bases:
        b.select(choice.winner)
    record["baseline"] = b0.describe()
    record["check"] = validity[choice.winner]

    def op(i: int) -> None:
        bases[i % k].launch(*operands[i % k])

    record.update(sides.time_side(timer, op, reps, max(warmup, k)))
    record["graph"] = sides.graph_side(
        timer, [_capturer(b, ops) for b, ops in zip(bases, operands, strict=True)],
        ops0[-1], check, reps, warmup)
    captured = getattr(b0, "captured", None)
    if captured is not None and "reason" not in record["graph"]:
        record["graph"]["captured"] = f"{captured.label} through {captured.binding}"
    record.update(records.roof(nbytes, record["kernel"]["median_ms"], copy_gbps))
    return record


def _capturer(base: Any, ops: tuple[Any, ...]) -> Callable[[], Any]:
    return lambda: base.capture(*ops)


def _library(base: Any) -> str:
    bindings = {a.binding for a in getattr(base, "algorithms", ())}
    if "torch" in bindings:
        return "torch"
    return "nvmath" if bindings == {"nvmath"} else "cupy"


def preprocess_status(base: Any, winner: str | None) -> dict[str, Any]:
    """Whether cuSPARSE's preprocessing ran for any algorithm (and for the winner), or why
    not in one line."""
    algorithms = list(getattr(base, "algorithms", ()))
    if any(a.binding == "torch" for a in algorithms):
        return {"ran": False, "why": "torch.sparse.sampled_addmm has no preprocessing step"}
    ran = [a.label for a in algorithms if a.preprocess]
    if ran:
        chosen = next((a for a in algorithms if a.label == winner), None)
        return {"ran": True, "algorithms": ran,
                "winner_preprocessed": bool(chosen is not None and chosen.preprocess)}
    refused = {label: why for label, why in getattr(base, "skipped", {}).items()
               if "preprocess" in label}
    if refused:
        return {"ran": False, "why": "; ".join(f"{k}: {v}" for k, v in refused.items())}
    nv = cusparse.nvmath_available()
    return {"ran": False, "why": nv.reason or "no preprocessed algorithm was set up"}


def second_side(
    timer: Any,
    op: Callable[[int], Any],
    *,
    what: str,
    reps: int,
    warmup: int,
    nbytes: int,
    copy_gbps: float,
    copies: int = 1,
    output: Any = None,
    check: sides.Check | None = None,
) -> dict[str, Any]:
    """The one-line second column (module docstring); with ``check`` its result (what
    ``op(0)`` returns, or ``output`` after it) is checked first. Every one of ``copies``
    input sets is used once before timing: cupyx checks a matrix's canonical format (a
    synchronising reduction) on its first product only."""
    record: dict[str, Any] = {"what": what}
    for i in range(max(warmup, 2, copies)):
        op(i)
    if check is not None:
        got = op(0)
        record["check"] = check(output if output is not None else got)
    n, probe, capped = sides.repetitions(timer, op, reps, None)
    record["probe_ms"] = probe
    if capped:
        record["capped"] = True
    record.update(sides.time_side(timer, op, n, 0))
    record.update(records.roof(nbytes, record["kernel"]["median_ms"], copy_gbps))
    return record
