"""What each kernel of a benchmark times: the variants of SpMV, SpMM and SDDMM, and the dense
widths.

A spec's einsum decides its kernel (:mod:`teaal_loops.ir.einsum`): SpMV specs are timed in the
SpMV cases, SpMM specs in the SpMM cases, SDDMM specs in the SDDMM cases. Without specs, or for
a kernel none of the given specs computes, the library runs: ``specs/*.yaml`` with
:data:`~teaal_loops.bench.variants.DEFAULT_SWEEPS` for SpMV, ``specs/spmm/*.yaml`` and
``specs/sddmm/*.yaml`` with :data:`DENSE_SWEEPS`. The dense kernels run on CSR (the layout
every SpMM and SDDMM spec of the library is written for) unless ``--layout`` names layouts
that serve their form (``heavy:W`` for SpMM), and have no ``auto`` choice.

Widths (``--widths``): SpMM's N and SDDMM's K, :data:`DEFAULT_WIDTHS` unless given;
``--widths 8,32`` sets both kernels' widths, ``--widths spmm:8,32`` one kernel's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from teaal_loops import auto
from teaal_loops.auto import library_dir
from teaal_loops.bench.variants import DEFAULT, DEFAULT_SWEEPS, Variant, expand
from teaal_loops.errors import TeaalLoopsError
from teaal_loops.layouts import get_layout, known_layouts
from teaal_loops.lowering import lower
from teaal_loops.schedules import schedule_kinds
from teaal_loops.spec import load_spec

SCHEDULE_CHOICES = ("all", "auto", *schedule_kinds())
DENSE_KERNELS = ("spmm", "sddmm")
DEFAULT_WIDTHS: Mapping[str, tuple[int, ...]] = {"spmm": (8, 32, 128), "sddmm": (32, 128)}
MAX_WIDTH = 4096
# N_TILE = 32: one warp a row walking the row once per 32 columns (the default, all of N, is
# lanes_over_n itself); WORK_PER_THREAD = 1: one nonzero a thread, for wide K
DENSE_SWEEPS: Mapping[str, tuple[int | str, ...]] = {
    "N_TILE": (32,),
    "WORK_PER_THREAD": (DEFAULT, 1),
    # nonzero_split's chunk: latency against search cost and split-row atomics. 12, 24 and 48
    # won power-law graphs on the H200 (pubmed N = 32 18.6 -> 16.0 us at 12, email-Enron
    # N = 128 60.6 -> 55.7 at 24, ca-AstroPh N = 32 28.4 -> 23.3 at 48; BENCHMARKS.md); 64
    # with 4 atoms loaded ahead on the H100 (ego-Twitter N = 32 72.2 -> 69.1 us against 32)
    "NNZ_PER_WORKER": (DEFAULT, 8, 12, 24, 48, 64, 128),
    # SDDMM runs' step: 16 (4 threads an atom, 2 runs each at K = 32) won 24 of 60 H100 cases
    # against the default 32 (8 threads), most at K = 32 (BENCHMARKS.md)
    "K_STEP": (DEFAULT, 16),
    # group_lanes_vec's lanes a row (default 4); 1: a thread a row, no reduction (banded
    # N = 8 on the H200: 2 lanes 81.9 us, 4 lanes 114.0, 8 lanes 221.9: fewer was faster)
    "ROW_LANES": (DEFAULT, 1, 2, 8, 16),
    # lanes_over_n_vec_rows' run of rows a worker (default 4); 2 won delaunay_n15 and
    # rgg_n_2_15_s0 at N = 128 on the H200 (14.0 and 20.4 us against 14.9 and 22.4 at 4)
    "ROWS": (DEFAULT, 2),
}


def library_specs() -> list[Path]:
    """Every SpMV spec of our library (``specs/*.yaml``), sorted by name."""
    return sorted(library_dir().glob("*.yaml"))


def dense_library_specs(kernel: str) -> list[Path]:
    """The library's specs of a dense kernel (``specs/spmm/*.yaml``, ``specs/sddmm/*.yaml``)."""
    return sorted((library_dir() / kernel).glob("*.yaml"))


def spec_kernel(path: Path) -> str:
    """``spmv``, ``spmm`` or ``sddmm``: the form of the spec's einsum (transposed forms are
    their untransposed kernel's)."""
    spec = load_spec(path)
    if auto.is_auto(spec):
        return "spmv"
    form = lower(spec).form
    if form.epilogue is not None:
        # the bench times kernel launches against cuSPARSE's product: an epilogue's second
        # launch would be timed for us and not for the baseline
        raise TeaalLoopsError(
            f"{path}: its einsums end with the epilogue {form.epilogue.text}; the bench times "
            "products: give the product's spec alone"
        )
    return str(form.kind)


def parse_widths(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``["8,32"]`` -> both dense kernels; ``["spmm:8,32", "sddmm:64"]`` -> one each; the
    kernels not named keep :data:`DEFAULT_WIDTHS`."""
    out = dict(DEFAULT_WIDTHS)
    named: set[str] = set()
    for item in items:
        kernel, sep, values = item.rpartition(":")
        kernel = kernel.strip()
        targets = [kernel] if sep else list(DENSE_KERNELS)
        if sep and kernel not in DENSE_KERNELS:
            raise TeaalLoopsError(f"--widths {item!r}: expected spmm:N,... or sddmm:K,... "
                                  "(or N,... for both)")
        widths: list[int] = []
        for raw in values.split(","):
            try:
                width = int(raw.strip())
            except ValueError:
                raise TeaalLoopsError(f"--widths {item!r}: {raw.strip()!r} is not an integer"
                                      ) from None
            if not 1 <= width <= MAX_WIDTH:
                raise TeaalLoopsError(f"--widths {item!r}: {width} is outside 1..{MAX_WIDTH}")
            widths.append(width)
        for target in targets:
            if target in named:
                raise TeaalLoopsError(f"--widths: the widths of {target} are given twice")
            named.add(target)
            out[target] = tuple(dict.fromkeys(widths))
    return out


def variants_for(
    specs: Sequence[str | Path] = (),
    *,
    sweeps: Mapping[str, Sequence[int | str]] | None = None,
    params: Mapping[str, int] | None = None,
    layouts: Sequence[str] = ("csr",),
    schedule: str = "all",
) -> tuple[list[Variant], bool]:
    """The SpMV variants to time and whether ``auto`` was asked for (by ``schedule`` or a spec).

    Without ``specs`` the library is used, with :data:`DEFAULT_SWEEPS` unless ``sweeps`` is
    given. ``schedule`` keeps only the variants of one schedule kind (``auto``: none, the auto
    choice alone is timed). A spec saying ``x-teaal-loops: {schedule: auto}`` asks for the auto
    choice instead of being timed itself.
    """
    _check_schedule(schedule)
    paths = [Path(s) for s in specs] or library_specs()
    if sweeps is None:
        sweeps = DEFAULT_SWEEPS if not specs else {}
    wants_auto = schedule == "auto"
    described: list[tuple[Path, Sequence[str]]] = []
    for path in paths:
        spec = load_spec(path)
        if auto.is_auto(spec):
            wants_auto = True
            continue
        if schedule not in ("all", "auto") and lower(spec).kind != schedule:
            continue
        described.append((path, tuple(spec.parameters)))
    if schedule == "auto":
        return [], True
    variants = expand(described, sweeps=sweeps, fixed=params, layouts=layouts)
    if not variants and not wants_auto:
        raise TeaalLoopsError(f"no spec left to benchmark for --schedule {schedule}")
    return variants, wants_auto


def dense_variants_for(
    kernel: str,
    specs: Sequence[Path] = (),
    *,
    sweeps: Mapping[str, Sequence[int | str]] | None = None,
    params: Mapping[str, int] | None = None,
    schedule: str = "all",
    layouts: Sequence[str] = ("csr",),
) -> list[Variant]:
    """The variants of a dense kernel in ``layouts`` (CSR unless given: layouts that serve the
    kernel's form, such as ``heavy:W`` for SpMM): ``specs`` (all of that kernel), else the
    library's with :data:`DENSE_SWEEPS` unless ``sweeps`` is given."""
    _check_schedule(schedule)
    if schedule == "auto":
        raise TeaalLoopsError(f"--schedule auto: {kernel.upper()} has no auto choice; drop "
                              f"--schedule auto or the {kernel} suite")
    paths = list(specs) or dense_library_specs(kernel)
    if sweeps is None:
        sweeps = DENSE_SWEEPS if not specs else {}
    described: list[tuple[Path, Sequence[str]]] = []
    for path in paths:
        spec = load_spec(path)
        if schedule != "all" and lower(spec).kind != schedule:
            continue
        described.append((path, tuple(spec.parameters)))
    variants = expand(described, sweeps=sweeps, fixed=params, layouts=layouts)
    if not variants:
        raise TeaalLoopsError(f"no {kernel} spec left to benchmark for --schedule {schedule}")
    return variants


def kernel_variants(
    specs: Sequence[str | Path],
    kernels: Iterable[str],
    *,
    sweeps: Mapping[str, Sequence[int | str]] | None = None,
    params: Mapping[str, int] | None = None,
    layouts: Sequence[str] = ("csr",),
    schedule: str = "all",
) -> tuple[dict[str, list[Variant]], bool]:
    """The variants of every kernel in ``kernels`` (module docstring) and whether SpMV's auto
    choice was asked for. A spec whose kernel is not among ``kernels`` is one line."""
    kernels = tuple(kernels)
    by_kernel: dict[str, list[Path]] = {k: [] for k in kernels}
    for spec in specs:
        path = Path(spec)
        kind = spec_kernel(path)
        if kind not in by_kernel:
            suite = "corpus" if kind == "spmv" else kind
            raise TeaalLoopsError(f"{path}: a {kind.upper()} spec, but no {kind} case runs "
                                  f"(add --suite {suite}, or give matrices with -m)")
        by_kernel[kind].append(path)
    dense = [k for k in kernels if k != "spmv"]
    served = {k: tuple(name for name in layouts if k in get_layout(name).forms) for k in dense}
    for kernel, own in served.items():
        if not own:
            serving = ", ".join(n for n in known_layouts() if kernel in get_layout(n).forms)
            raise TeaalLoopsError(
                f"--layout {', '.join(layouts)}: none serves {kernel.upper()} (layouts that "
                f"do: {serving}); add --layout csr, or run the {kernel} suite alone")
    out: dict[str, list[Variant]] = {}
    wants_auto = False
    if "spmv" in by_kernel:
        out["spmv"], wants_auto = variants_for(by_kernel["spmv"], sweeps=sweeps, params=params,
                                               layouts=layouts, schedule=schedule)
    for kernel in dense:
        out[kernel] = dense_variants_for(kernel, by_kernel[kernel], sweeps=sweeps,
                                         params=params, schedule=schedule,
                                         layouts=served[kernel])
    return out, wants_auto


def _check_schedule(schedule: str) -> None:
    if schedule not in SCHEDULE_CHOICES:
        raise TeaalLoopsError(
            f"--schedule {schedule!r}: expected one of {', '.join(SCHEDULE_CHOICES)}"
        )
