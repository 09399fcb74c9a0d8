"""Validation of loop orders and spacetime against an einsum's final ranks."""

from __future__ import annotations

from teaal_loops.spec.check_partitioning import fail, hint, names
from teaal_loops.spec.draft import Draft
from teaal_loops.spec.key_paths import item


def check_loop_order(draft: Draft, out: str, final: tuple[str, ...]) -> None:
    """A given loop order is a permutation of the final ranks."""
    order = draft.loop_order.get(out)
    if order is None:
        return
    path = f"mapping.loop-order.{out}"
    for i, r in enumerate(order):
        if r not in final:
            fail(
                f"{r} is not a final rank of {out}{hint(r, final)}",
                draft.location_of(item(path, i)),
                item(path, i),
                expected=f"a permutation of the final ranks [{', '.join(final)}]",
            )
    missing = [r for r in final if r not in order]
    if missing:
        fail(
            f"the loop order [{', '.join(order)}] leaves out {names(missing)}",
            draft.location_of(path),
            path,
            expected=f"every final rank once: a permutation of [{', '.join(final)}]",
        )


def check_spacetime(draft: Draft, out: str, final: tuple[str, ...]) -> None:
    """Spacetime places every final rank exactly once, in space or in time.

    TeAAL tolerates a rank left out; no GPU schedule can honour that (the rank would have
    neither a thread nor a loop), so it is an error here."""
    st = draft.spacetime.get(out)
    if st is None:
        return
    seen: dict[str, str] = {}
    for stamp, ranks in (("space", st.space), ("time", st.time)):
        path = f"mapping.spacetime.{out}.{stamp}"
        for i, r in enumerate(ranks):
            where, ipath = draft.location_of(item(path, i)), item(path, i)
            if r.rank not in final:
                fail(
                    f"{r.rank} is not a final rank of {out}{hint(r.rank, final)}",
                    where,
                    ipath,
                    expected=f"ranks from [{', '.join(final)}]",
                )
            if r.rank in seen:
                fail(
                    f"{r.rank} is listed twice (in {seen[r.rank]} and {stamp})",
                    where,
                    ipath,
                    expected="each final rank in space or time, once",
                )
            seen[r.rank] = stamp
    missing = [r for r in final if r not in seen]
    if missing:
        path = f"mapping.spacetime.{out}"
        fail(
            f"spacetime of {out} does not place {names(missing)} in space or time, so it "
            "cannot be lowered",
            draft.location_of(path),
            path,
            expected=f"every final rank of {out} ([{', '.join(final)}]) in space or time",
        )
