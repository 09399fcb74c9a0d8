"""Fuzzing the Matrix Market reader, in CI: seeded mutation of real and hand-made files, and
hypothesis-generated matrices in every legal spelling.

Every input is read three ways (SciPy's C++ reader, the NumPy reader, line by line only). The
properties, for over 5,000 mutated files per run:

* nothing but a :class:`~teaal_loops.errors.TeaalLoopsError` escapes (no traceback), and its
  text is one line naming the file;
* the three ways agree exactly: the same error text, or the same matrix bit for bit;
* an accepted file is read to the values SciPy's ``scipy.io.mmread`` gives for it (after
  removing what we accept and SciPy does not: comment lines in the body, a leading ``+``, CRs,
  a banner in another case); anything else must be refused;
* memory stays bounded: decompression bombs and huge headers, generated small here, are
  refused with a traced peak far below 2 GB, and the whole process never passes 2 GB.

Corpus seeds come from ``../shared/corpus`` beside the checkout or ``$TEAAL_LOOPS_CORPUS``.
"""

from __future__ import annotations

import gzip
import io
import random
import re
import resource
import subprocess
import sys
import tracemalloc
import warnings
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.io._fast_matrix_market as scipy_fmm
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teaal_loops.errors import TeaalLoopsError
from teaal_loops.matrix import limits, mm_fast, mmio, read_matrix_market_bytes
from tests.conftest import REPO, corpus_dir

MUTANTS_PER_FAMILY = 5000  # per seed family: 5,000 without the corpus, 10,000 with it
TWO_GB = 2 << 30
NAME = "fuzz.mtx"
HAND_MADE = [
    "%%MatrixMarket matrix coordinate real general\n% a comment\n%\n3 4 5\n1 1 1.5\n"
    "3 4 -2e-1\n1 3 2\n2 2 0\n1 3 0.5\n",
    "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 2\n2 2 -1\n",
    "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 2 -1.5\n",
    "%%MatrixMarket matrix coordinate real hermitian\n2 2 2\n2 1 3\n1 1 1\n",
    "%%MatrixMarket matrix coordinate integer general\n2 3 3\n1 2 -7\n2 1 3\n2 3 12\n",
    "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 3\n3 2\n",
    "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n4 4\n4 2\n",
    "%%MatrixMarket matrix coordinate double general\n2 2 2\n1 1 .5\n2 2 5.\n",
    "%%MatrixMarket matrix array real general\n2 3\n1\n2\n0\n4\n5\n6\n",
    "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n",
    "%%MatrixMarket matrix array integer skew-symmetric\n3 3\n1\n-2\n3\n",
    "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 1 nan\n2 2 -inf\n3 3 1e-400\n1 2 -0\n",
    "%%MatrixMarket matrix coordinate real general\r\n2 2 2\r\n1 1\t1.25e+2\r\n\r\n2 2 +3\r\n",
    "%%MatrixMarket matrix coordinate real general\n5 1 0\n",
    "%%MatrixMarket matrix coordinate real general\n2 2 3\n% body comment\n1 1 1\n\n2 2 2\n1 1 3\n",
]
TOKENS = (
    "0 1 2 -1 +1 3.0 1.9 1e0 1e400 -1e400 1e-400 nan NaN -nan +nan inf -inf +inf Infinity infin "
    "-0 +.5 5. . - + e5 1e 1e+ 0x10 1_0 1.2.3 1e2e3 1-2 2147483648 9223372036854775808 % %% 2^40 "
    "1099511627776 1000000000000 1180591620717411303424"
).split() + ["9" * 20, "9" * 400, "0" * 30 + "1", "\x00", "\xa0", "1\x0b1", "\xd9\xa1", "1\r1", ""]
SNIPPETS = [bytes([byte]) for byte in b"\n \t%-+.e19\x00\xff\x0b\x0c"]
SNIPPETS += [b"\r\n", b"% c\n", b"\n\n", b"\x1f\x8b", b"nan"]
BANNER_WORDS = (
    "matrix coordinate array real double integer pattern complex general symmetric "
    "skew-symmetric hermitian vector X"
).split()


# --------------------------------------------------------------------------------------------
# The oracle


@pytest.fixture(autouse=True)
def quiet_scipy(monkeypatch: pytest.MonkeyPatch) -> None:
    """One SciPy thread: its pool costs a millisecond a call, which thousands of tiny files
    would otherwise pay (the values do not depend on it)."""
    monkeypatch.setattr(scipy_fmm, "PARALLELISM", 1)
    monkeypatch.setattr(mm_fast, "SCIPY_MIN_BODY", 0)


def _read(data: bytes, path: str) -> tuple[str, object]:
    mm_fast.HAVE_SCIPY_READER = path == "scipy"
    mmio.USE_FAST_PATH = path != "slow"
    try:
        return "matrix", read_matrix_market_bytes(data, name=NAME)
    except TeaalLoopsError as err:
        return "error", err.cli_line()
    finally:
        mm_fast.HAVE_SCIPY_READER, mmio.USE_FAST_PATH = True, True


def _same_matrix(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    return (
        a.shape == b.shape
        and np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.data, b.data, equal_nan=True)
    )


def _normalized(text: bytes) -> bytes:
    """What SciPy can read of a text we accept: no comment or blank lines after the banner,
    single spaces, no CR, no '+' starting a token, a canonical banner."""
    out = []
    for number, line in enumerate(text.split(b"\n")):
        tokens = re.findall(rb"[^ \t]+", line[:-1] if line.endswith(b"\r") else line)
        if number == 0:
            out.append(b" ".join([b"%%MatrixMarket", *(t.lower() for t in tokens[1:])]))
        elif tokens and not tokens[0].startswith(b"%"):
            out.append(b" ".join(t[1:] if t.startswith(b"+") else t for t in tokens))
    return b"\n".join(out) + b"\n"


def _scipy_reading(data: bytes) -> sp.csr_matrix:
    text = gzip.decompress(data) if data.startswith(b"\x1f\x8b") else data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = scipy.io.mmread(io.BytesIO(_normalized(text)))
    if isinstance(theirs, np.ndarray):
        return sp.csr_matrix(theirs.astype(np.float64))
    coo = sp.coo_matrix(theirs)
    coo = sp.coo_matrix((coo.data.astype(np.float64) + 0.0, (coo.row, coo.col)), shape=coo.shape)
    csr = coo.tocsr()
    csr.sum_duplicates()
    csr.sort_indices()
    return csr


def check_case(data: bytes) -> str:
    """Read ``data`` all three ways and apply every property; 'matrix' or 'error'."""
    try:
        results = [_read(data, path) for path in ("scipy", "numpy", "slow")]
    except Exception as exc:  # noqa: BLE001 - a traceback is the failure being looked for
        raise AssertionError(f"{type(exc).__name__}: {exc} on input {data[:300]!r}") from exc
    kinds = {kind for kind, _ in results}
    assert len(kinds) == 1, f"paths disagree on {data[:300]!r}: {results}"
    if kinds == {"error"}:
        texts = {text for _, text in results}
        assert len(texts) == 1, f"error texts differ on {data[:300]!r}: {texts}"
        text = texts.pop()
        assert isinstance(text, str) and "\n" not in text and text.startswith(NAME), text
        return "error"
    ours = [m for _, m in results]
    assert all(_same_matrix(ours[0], m) for m in ours[1:]), f"matrices differ on {data[:300]!r}"
    try:
        theirs = _scipy_reading(data)
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"accepted, but SciPy refuses {data[:300]!r}: {exc}") from exc
    if ours[0].shape != theirs.shape or not _same_values(ours[0], theirs):
        raise AssertionError(f"values differ from SciPy's on {data[:300]!r}")
    return "matrix"


def _same_values(ours: sp.csr_matrix, theirs: sp.csr_matrix) -> bool:
    if ours.shape[0] * ours.shape[1] <= 1 << 16:
        return np.array_equal(ours.toarray(), theirs.toarray(), equal_nan=True)
    return _same_matrix(ours, theirs)


# --------------------------------------------------------------------------------------------
# Seeds and mutations


@lru_cache(maxsize=1)
def corpus_seeds() -> tuple[bytes, ...]:
    """The header and first 40 entries of every corpus matrix, its size line made to match."""
    seeds = []
    for path in sorted(corpus_dir().glob("matrices/*.mtx*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            lines = handle.read(1 << 16).split(b"\n")[:-1]
        size_at = next(i for i, line in enumerate(lines) if line and not line.startswith(b"%"))
        rows, cols = lines[size_at].split()[:2]
        head = lines[: min(size_at, 6)] + [b"% (comments cut)"] * (size_at > 6)
        body = lines[size_at + 1 : size_at + 41]
        seeds.append(b"\n".join([*head, b"%s %s %d" % (rows, cols, len(body)), *body]) + b"\n")
    return tuple(seeds)


def _mutate(seed: bytes, rng: random.Random) -> bytes:
    data = seed
    for _ in range(rng.choice((1, 1, 2, 3))):
        data = rng.choice(_MUTATIONS)(data, rng)
    if rng.random() < 0.15:
        data = gzip.compress(data, compresslevel=1)
        if rng.random() < 0.2:
            data = data[: rng.randrange(len(data))]
    return data


def _position(data: bytes, rng: random.Random) -> int:
    """Anywhere, but four times in five after the banner (the body is what needs fuzzing)."""
    first = data.find(b"\n") + 1 if rng.random() < 0.8 else 0
    return rng.randrange(first, len(data) + 1)


def _set_byte(data: bytes, rng: random.Random) -> bytes:
    at = _position(data, rng)
    return data[:at] + rng.choice(SNIPPETS)[:1] + data[at + 1 :]


def _insert(data: bytes, rng: random.Random) -> bytes:
    at = _position(data, rng)
    return data[:at] + rng.choice(SNIPPETS) + data[at:]


def _delete(data: bytes, rng: random.Random) -> bytes:
    at = _position(data, rng)
    return data[:at] + data[at + rng.randint(1, 12) :]


def _token(data: bytes, rng: random.Random) -> bytes:
    spans = [m.span() for m in re.finditer(rb"[^ \t\r\n]+", data)]
    if not spans:
        return data
    lo, hi = rng.choice(spans[1:] or spans)  # rarely the banner's first word
    return data[:lo] + rng.choice(TOKENS).encode("latin-1") + data[hi:]


def _respell(data: bytes, rng: random.Random) -> bytes:
    """A legal respelling of a token or a separator: the value must not change."""
    spans = [m.span() for m in re.finditer(rb"[^ \t\r\n]+|[ \t]+", data)][1:]
    if not spans:
        return data
    lo, hi = rng.choice(spans)
    piece = data[lo:hi]
    if piece.strip(b" \t") == b"":
        new = rng.choice((b"\t", b"   ", b" \t "))
    elif piece.isdigit():
        new = b"0" + piece
    else:
        new = rng.choice((b"+" + piece, piece.upper(), piece + b"\t"))
    return data[:lo] + new + data[hi:]


def _lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    at = rng.randrange(1, len(lines)) if len(lines) > 1 else 0
    op = rng.randrange(5)
    if op == 0:
        lines.insert(at, lines[at])
    elif op == 1:
        del lines[at]
    elif op == 2:
        lines.insert(at, rng.choice((b"", b"% note", b"   ", b"%%MatrixMarket")))
    elif op == 3:
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]
    else:
        lines = [line + b"\r" for line in lines]
    return b"\n".join(lines)


def _banner(data: bytes, rng: random.Random) -> bytes:
    first, _, rest = data.partition(b"\n")
    words = first.split()
    if len(words) > 1:
        words[rng.randrange(1, len(words))] = rng.choice(BANNER_WORDS).encode()
    return b" ".join(words) + b"\n" + rest


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


_MUTATIONS = [
    _set_byte,
    _insert,
    _delete,
    _token,
    _token,
    _respell,
    _respell,
    _lines,
    _lines,
    _banner,
    _truncate,
]


def _fuzz(seeds: tuple[bytes, ...], count: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    outcomes = {"matrix": 0, "error": 0}
    for _ in range(count):
        outcomes[check_case(_mutate(rng.choice(seeds), rng))] += 1
    return outcomes


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


# --------------------------------------------------------------------------------------------
# The tests


def test_seeds_read_and_agree_with_scipy() -> None:
    for seed in HAND_MADE:
        assert check_case(seed.encode("latin-1")) == "matrix", seed
        assert check_case(gzip.compress(seed.encode("latin-1"))) == "matrix", seed


def test_mutants_of_hand_made_files() -> None:
    outcomes = _fuzz(tuple(s.encode("latin-1") for s in HAND_MADE), MUTANTS_PER_FAMILY, 20240601)
    assert outcomes["matrix"] > 200 and outcomes["error"] > 1000, outcomes  # both sides explored
    assert _peak_rss() < TWO_GB


def test_mutants_of_corpus_files() -> None:
    seeds = corpus_seeds()
    if not seeds:
        pytest.skip(f"no corpus matrices under {corpus_dir()} (set TEAAL_LOOPS_CORPUS)")
    for seed in seeds:
        assert check_case(seed) == "matrix", seed[:200]
    outcomes = _fuzz(seeds, MUTANTS_PER_FAMILY, 7)
    assert outcomes["matrix"] > 200 and outcomes["error"] > 1000, outcomes
    assert _peak_rss() < TWO_GB


def _bombs() -> Iterator[tuple[str, bytes]]:
    """Small inputs (at most a few MB) that expand hugely or declare huge sizes."""
    floods = dict(blank=b"\n", spaces=b" ", comments=b"% x\n", nul=b"\x00")
    floods.update(entries=b"1 1 1\n", short=b"1 1\n")
    sizes = (
        "3 3 3|1000 1000 100000|100000 100000 10000000|1099511627776 1 0|"
        "1099511627776 1099511627776 1000000000000|4611686018427387904 2 1"
    ).split("|")
    for size in sizes:
        for name, unit in floods.items():
            member = gzip.compress(unit * ((1 << 20) // len(unit)), compresslevel=9)
            head = gzip.compress(
                f"%%MatrixMarket matrix coordinate real general\n{size}\n".encode()
            )
            yield f"{size}/{name}/gzip", head + member * 300  # about 300 MiB of text
        yield (
            f"{size}/plain",
            f"%%MatrixMarket matrix coordinate real general\n{size}\n".encode() + b"\n" * (1 << 19),
        )
    yield "array", b"%%MatrixMarket matrix array real general\n3037000499 3037000499\n1\n"


def test_bombs_and_huge_headers_stay_in_bounded_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 30)  # a small host, anywhere
    for label, data in _bombs():
        assert len(data) < 100 << 20
        tracemalloc.start()
        try:
            _, result = _read(data, "scipy")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 512 << 20, (label, peak)
        assert isinstance(result, str) and "\n" not in result, (label, result)
    assert _peak_rss() < TWO_GB


def test_the_command_line_refuses_bad_files_in_one_line(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.mtx.gz"
    bomb.write_bytes(
        gzip.compress(b"%%MatrixMarket matrix coordinate real general\n9 9 9\n")
        + gzip.compress(b"\n" * (1 << 20)) * 64
    )
    decimal = tmp_path / "decimal.mtx"
    decimal.write_text("%%MatrixMarket matrix coordinate real general\n3 3 1\n3 3.0 1\n")
    huge = tmp_path / "huge.mtx"
    huge.write_text(
        "%%MatrixMarket matrix coordinate real general\n1099511627776 1099511627776 "
        "1000000000000\n1 1 1\n"
    )
    cases = [["-m", str(path)] for path in (bomb, decimal, huge, "/dev/zero", tmp_path)]
    cases += [
        ["--synthetic", f"uniform:rows={rows},nnz=10{extra}"]
        for rows, extra in (("9^99999999", ""), ("100", ",dtype=xyz"))
    ]
    spec = str(REPO / "specs" / "thread_mapped.yaml")
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "teaal_loops", "explain", spec, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        for args in cases
    ]
    for args, run in zip(cases, runs, strict=True):
        _, err = run.communicate(timeout=60)
        lines = err.decode().splitlines()
        assert run.returncode == 2, (args, err)
        assert len(lines) == 1 and "error: " in lines[0] and "Traceback" not in lines[0], (
            args,
            err,
        )


# --------------------------------------------------------------------------------------------
# Hypothesis: any legal spelling of a generated matrix reads to exactly its values

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_SEPARATOR = st.sampled_from([" ", "  ", "\t", " \t "])
_REAL_FORMATS = ["{!r}", "{:.17e}", "{:.17E}", "{:+.17g}", "{:.17g}"]


@st.composite
def spelled_matrix(draw: st.DrawFn) -> tuple[bytes, np.ndarray]:
    field = draw(st.sampled_from(["real", "integer", "pattern"]))
    symmetry = draw(st.sampled_from(["general", "symmetric", "skew-symmetric"]))
    rows = draw(st.integers(1, 7))
    cols = rows if symmetry != "general" else draw(st.integers(1, 7))
    cells = [
        (r, c)
        for r in range(rows)
        for c in range(cols)
        if symmetry == "general" or r > c or (r == c and symmetry == "symmetric")
    ]
    chosen = (
        draw(st.lists(st.sampled_from(cells), unique=True, max_size=len(cells))) if cells else []
    )
    if field == "pattern" and symmetry == "skew-symmetric":
        symmetry = "symmetric"
    expected = np.zeros((rows, cols))
    lines = []
    for r, c in chosen:
        value, text = _spelled_value(draw, field)
        expected[r, c] = value
        if symmetry != "general" and r != c:
            expected[c, r] = -value if symmetry == "skew-symmetric" else value
        sep = draw(_SEPARATOR)
        index = draw(st.sampled_from(["{}", "0{}", "00{}"]))
        lines.append(
            sep.join([index.format(r + 1), index.format(c + 1), *([text] if text else [])])
        )
        if draw(st.integers(0, 9)) == 0:
            lines.append(draw(st.sampled_from(["", "% note", "  ", "\t%"])))
    header = [
        f"%%MatrixMarket matrix coordinate {field} {symmetry}",
        f"{rows} {cols} {len(chosen)}",
    ]
    end = draw(st.sampled_from(["\n", "\r\n"]))
    text = end.join(header + lines) + end
    data = text.encode()
    return (gzip.compress(data) if draw(st.booleans()) else data), expected


def _spelled_value(draw: st.DrawFn, field: str) -> tuple[float, str]:
    if field == "pattern":
        return 1.0, ""
    if field == "integer":
        value = draw(st.integers(-(2**63) + 1, 2**63 - 1))
        return float(value), draw(st.sampled_from(["{}", "{:+}", "{:03}"])).format(value)
    value = draw(st.floats(allow_nan=True, allow_infinity=True))
    if np.isnan(value):
        return value, draw(st.sampled_from(["nan", "NaN", "-nan"]))
    if np.isinf(value):
        return value, ("-" if value < 0 else draw(st.sampled_from(["", "+"]))) + draw(
            st.sampled_from(["inf", "Inf", "Infinity", "INFINITY"])
        )
    return value + 0.0, draw(st.sampled_from(_REAL_FORMATS)).format(value)


@FUZZ
@given(spelled_matrix())
def test_every_legal_spelling_reads_to_its_values(case: tuple[bytes, np.ndarray]) -> None:
    data, expected = case
    assert check_case(data) == "matrix"
    A = read_matrix_market_bytes(data)
    assert np.array_equal(A.toarray(), expected, equal_nan=True)


@FUZZ
@given(st.sampled_from(HAND_MADE), st.integers(0, 10**6), st.binary(min_size=1, max_size=8))
def test_inserted_bytes_never_escape_as_tracebacks(seed: str, at: int, junk: bytes) -> None:
    data = seed.encode("latin-1")
    at %= len(data) + 1
    check_case(data[:at] + junk + data[at:])
