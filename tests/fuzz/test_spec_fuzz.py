"""Fuzzing the spec front end and lowering: 20,000 hostile specs per run, seeded.

Cases are seeded mutations (tests/fuzz/spec_mutations.py) of the repository's specs (always
present) and of the shared corpus's TeAAL specs ($TEAAL_LOOPS_CORPUS, else ../shared/corpus
beside the checkout), plus spec-shaped documents from hypothesis. Each case takes the path the
CLI takes, in process: ``load_spec_string``, the JSON ``parse`` prints, then ``lowering.lower`` inside
``spec_errors(spec)``. Asserted for every case:

* nothing but a :class:`TeaalLoopsError` escapes (a traceback would be exit status 1);
* every message, error or warning, is one line;
* every spec error, and every later error that names its spec value (``key_path``), carries a
  LINE:COL; later errors that name no value are counted and printed (``-s`` shows them).

A smaller set runs the real ``main()`` on files: exit status 0 or 2, one error line.

Reproduce a failure with the seed and case number it prints:
``TEAAL_LOOPS_FUZZ_SEED=<seed> python -m pytest tests/fuzz -k <test>``; each case draws from
its own ``random.Random(f"{seed}:{case}")``. ``TEAAL_LOOPS_FUZZ_CASES`` scales the total.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teaal_loops.cli import main
from teaal_loops.errors import SpecError, TeaalLoopsError, spec_errors
from teaal_loops.lowering import lower
from teaal_loops.spec import load_spec_string, spec_to_json
from tests.fuzz.spec_mutations import HOSTILE_STRINGS, HUGE_DIGITS, mutate

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("TEAAL_LOOPS_FUZZ_SEED", "20260601"))
TOTAL = int(os.environ.get("TEAAL_LOOPS_FUZZ_CASES", "20000"))
HYPOTHESIS_CASES = max(TOTAL // 10, 1)
MUTATION_CASES = TOTAL - HYPOTHESIS_CASES
CLI_CASES = 150
SOURCE = "fuzz.yaml"

# Errors raised after parsing that name no spec value, so nothing can place them in the file:
# message prefix -> count. Printed by each test; the code raising them should pass a key_path.
UNLOCATED: Counter[str] = Counter()


def _corpus_specs() -> list[Path]:
    env = os.environ.get("TEAAL_LOOPS_CORPUS")
    root = Path(env) if env else REPO / ".." / "shared" / "corpus"
    return sorted((root / "teaal-specs").resolve().glob("**/*.yaml"))


REPO_SPECS = sorted((REPO / "specs").glob("**/*.yaml"))
CORPUS_SPECS = _corpus_specs()


def check_case(text: str) -> str:
    """Run one spec through parse, ``parse``'s JSON and lowering; assert the error contract."""
    try:
        spec = load_spec_string(text, source=SOURCE)
    except SpecError as err:
        assert err.location is not None and err.location.line is not None, f"unlocated: {err}"
        assert "\n" not in err.cli_line(), repr(err.cli_line())
        return "spec error"
    for warning in spec.warnings:
        assert warning.location is not None and "\n" not in str(warning), repr(str(warning))
    json.dumps(spec_to_json(spec))
    try:
        with spec_errors(spec):
            lower(spec)
    except TeaalLoopsError as err:
        assert "\n" not in err.cli_line(), repr(err.cli_line())
        if err.key_path is not None:  # spec_errors must have placed it
            assert err.location is not None and err.location.line is not None, err.cli_line()
        elif err.location is None or err.location.line is None:
            UNLOCATED[f"{type(err).__name__}: {err.message[:90]}"] += 1
        return "lowering error"
    return "lowered"


def run_mutations(texts: list[str], cases: int, label: str) -> Counter[str]:
    outcomes: Counter[str] = Counter()
    for case in range(cases):
        rng = random.Random(f"{SEED}:{label}:{case}")
        base = texts[case] if case < len(texts) else rng.choice(texts)
        text, how = (base, "unmutated") if case < len(texts) else mutate(base, rng)
        try:
            outcomes[check_case(text)] += 1
        except Exception as exc:  # noqa: BLE001 - any escape is the failure being looked for
            raise AssertionError(
                f"seed {SEED}, {label} case {case} ({how}): {type(exc).__name__}: {exc}\n"
                f"--- spec ---\n{text[:3000]}"
            ) from exc
    _report(label, outcomes)
    return outcomes


_REPORTED: set[str] = set()


def _report(label: str, outcomes: Counter[str] | Counter[int]) -> None:
    print(f"\n{label}: {dict(outcomes)}")
    for message, count in UNLOCATED.most_common():
        if message not in _REPORTED:
            _REPORTED.add(message)
            print(f"  unlocated after parsing ({count}x so far): {message}")


def _share(corpus_present: bool) -> int:
    """The repository specs take the corpus's share when the corpus is absent."""
    return MUTATION_CASES // 2 if corpus_present else MUTATION_CASES


def test_mutated_repository_specs() -> None:
    texts = [p.read_text(encoding="utf-8") for p in REPO_SPECS]
    assert texts, "the repository's specs/ folder is empty"
    outcomes = run_mutations(texts, _share(bool(CORPUS_SPECS)), "repo")
    # The unmutated specs all lower, and mutation reaches every stage.
    assert outcomes["lowered"] >= len(texts)
    assert outcomes["spec error"] and outcomes["lowering error"]


def test_mutated_corpus_specs() -> None:
    if not CORPUS_SPECS:
        pytest.skip(
            "no TeAAL specs under $TEAAL_LOOPS_CORPUS/teaal-specs or ../shared/corpus/teaal-specs"
        )
    texts = [p.read_text(encoding="utf-8") for p in CORPUS_SPECS]
    outcomes = run_mutations(texts, MUTATION_CASES - _share(True), "corpus")
    assert outcomes["spec error"] and outcomes["lowered"]


# ---- hypothesis: spec-shaped documents ----------------------------------------------------

NAMES = st.sampled_from(["A", "B", "Z", "T", "class", "Z_REF", "M", "__init__", "1A", "A B"])
RANKS = st.sampled_from(["M", "K", "N", "M0", "M1", "MK", "K0", "Q", "m", "1M", "\u00e9"])
SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.just(int(HUGE_DIGITS[:39])),
    st.floats(),
    st.booleans(),
    st.none(),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=12),
)
SIZE = st.one_of(
    st.integers(min_value=-3, max_value=2**64).map(str), NAMES, st.sampled_from(["A.4", "A.N"])
)
FUNCTIONS = st.one_of(
    st.builds(
        "{}({})".format,
        st.sampled_from(
            [
                "uniform_shape",
                "nway_shape",
                "uniform_occupancy",
                "follow",
                "flatten",
                "x_merge_path",
            ]
        ),
        SIZE,
    ),
    st.sampled_from(["flatten()", "uniform_occupancy(A.W)", "x_merge_path(A.I)"]),
    SCALARS,
)
EXPRESSIONS = st.one_of(
    st.sampled_from(
        [
            "Z[m] = A[m, k] * B[k]",
            "Z[m] = A[k, m] * B[k]",
            "Z[m, n] = A[m, k] * B[k, n]",
            "T[k, m, n] = take(A[m, k], B[k, n], 1)",
            "O[x] = I[x + r] * F[r]",
        ]
    ),
    st.text(alphabet="ZABmkn[], =*+\n\t", max_size=30),
)
RANK_LISTS = st.one_of(st.lists(RANKS, max_size=4), SCALARS)
SPACETIME = st.fixed_dictionaries(
    {"space": RANK_LISTS, "time": RANK_LISTS}, optional={"opt": st.sampled_from(["slip", 3])}
)
MAPPING = st.fixed_dictionaries(
    {},
    optional={
        "rank-order": st.dictionaries(NAMES, RANK_LISTS, max_size=3),
        "partitioning": st.dictionaries(
            NAMES,
            st.dictionaries(
                st.one_of(RANKS, st.sampled_from(["(M, K)", "(K, M)", "(M, M)"])),
                st.one_of(st.lists(FUNCTIONS, max_size=3), SCALARS),
                max_size=3,
            ),
            max_size=2,
        ),
        "loop-order": st.dictionaries(NAMES, RANK_LISTS, max_size=2),
        "spacetime": st.dictionaries(NAMES, st.one_of(SPACETIME, SCALARS), max_size=2),
    },
)
EXTENSIONS = st.fixed_dictionaries(
    {},
    optional={
        "schedule": st.sampled_from(["auto", "merge_path", "thread_mapped", "fast"]),
        "layout": st.sampled_from(["csr", "csc", "bcsr:0x0", "bcsr:4x4", "ell:2", "a\nb"]),
        "block_threads": SCALARS,
        "params": st.dictionaries(NAMES, SCALARS, max_size=2),
    },
)
DOCUMENTS = st.fixed_dictionaries(
    {
        "einsum": st.fixed_dictionaries(
            {
                "declaration": st.dictionaries(NAMES, RANK_LISTS, max_size=4),
                "expressions": st.one_of(st.lists(EXPRESSIONS, max_size=2), SCALARS),
            }
        )
    },
    optional={"mapping": MAPPING, "x-teaal-loops": EXTENSIONS},
)


@settings(
    max_examples=HYPOTHESIS_CASES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(doc=DOCUMENTS, indent=st.sampled_from([None, 2]))
def test_hypothesis_spec_documents(doc: dict[str, object], indent: int | None) -> None:
    text = json.dumps(doc, indent=indent, allow_nan=True).replace("NaN", ".nan")
    text = text.replace("-Infinity", "-.inf").replace("Infinity", ".inf")
    try:
        check_case(text)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"{type(exc).__name__}: {exc}\n--- spec ---\n{text[:3000]}") from exc


# ---- the real command line ----------------------------------------------------------------


def test_the_cli_exits_0_or_2_with_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = [p.read_text(encoding="utf-8") for p in REPO_SPECS]
    spec = tmp_path / "fuzz.yaml"
    statuses: Counter[int] = Counter()
    for case in range(CLI_CASES):
        rng = random.Random(f"{SEED}:cli:{case}")
        text, how = mutate(rng.choice(texts), rng)
        spec.write_text(text, encoding="utf-8", errors="surrogatepass")
        for argv in (
            ["parse", str(spec)],
            ["explain", str(spec), "--synthetic", "uniform:rows=40,nnz=120,seed=1"],
        ):
            status = main(argv)
            err = capsys.readouterr().err
            where = f"seed {SEED}, cli case {case} ({how}), {argv[0]}"
            assert status in (0, 2), f"{where}: exit {status}\n{err}"
            statuses[status] += 1
            if status == 2:
                last = err.rstrip("\n").split("\n")[-1]
                assert ": error: " in last or last.startswith("error: "), f"{where}: {err}"
                assert "Traceback" not in err, f"{where}: {err}"
                located = last.startswith(f"{spec}:") and last.split(":")[1].isdigit()
                if argv[0] == "parse":  # every spec error is located
                    assert located, f"{where}: {last}"
                elif not located:
                    UNLOCATED[f"cli {argv[0]}: {last[:100]}"] += 1
    _report("cli", statuses)
    assert statuses[0] and statuses[2]
