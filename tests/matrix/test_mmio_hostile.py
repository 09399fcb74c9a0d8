"""Hostile Matrix Market input: wrong answers, bombs, devices, huge sizes; all refused in one
located line, quickly and in bounded memory, the same way on the fast and the slow path."""

from __future__ import annotations

import gzip
import os
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from teaal_loops.errors import MatrixError
from teaal_loops.matrix import (
    limits,
    mm_fast,
    mm_header,
    mmio,
    read_matrix_market,
    read_matrix_market_bytes,
)

REAL = "%%MatrixMarket matrix coordinate real general\n"
PATHS = ["scipy", "numpy", "slow"]


@pytest.fixture
def small_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host with 1 GiB of memory available, whatever this machine has."""
    monkeypatch.setattr(limits, "available_memory", lambda: 1 << 30)


def _use(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mm_fast, "HAVE_SCIPY_READER", path == "scipy")
    monkeypatch.setattr(mm_fast, "SCIPY_MIN_BODY", 0)
    monkeypatch.setattr(mmio, "USE_FAST_PATH", path != "slow")


def _error(data: bytes | str, name: str = "m.mtx") -> MatrixError:
    raw = data.encode("latin-1") if isinstance(data, str) else data
    with pytest.raises(MatrixError) as err:
        read_matrix_market_bytes(raw, name=name)
    assert "\n" not in err.value.cli_line()
    return err.value


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("body", "line", "column", "words"),
    [
        ("3 3.0 1\n1 1 2\n", 3, 3, "column index '3.0' is not an integer"),
        ("1 1 2\n2 1.9 5\n", 4, 3, "column index '1.9' is not an integer"),
        ("1e0 1 2\n1 1 2\n", 3, 1, "row index '1e0' is not an integer"),
        ("+1 1 2\n1 1 2\n", 3, 1, "row index '+1' is not an integer"),
        ("1 -1 2\n1 1 2\n", 3, 3, "column index '-1' is not an integer"),
        ("1 1 1e400\n2 2 1\n", 3, 5, "value '1e400' overflows float64"),
        ("1 1 1\n2 2 -1.8e308\n", 4, 5, "overflows float64"),
        ("1 1 1\n2 2 " + "9" * 400 + "\n", 4, 5, "overflows float64"),
        ("1 1 1\n99999999999999999999999 1 1\n", 4, 1, "row index '99999999999999999999999'"),
        ("1 1 1\n1\x0b1 1 1\n", 4, 1, "row index '1\\x0b1' is not an integer"),
        ("1 1 1\n1 1 1\r2\n", 4, 5, "'1\\r2' is not a valid number"),
    ],
)
def test_no_wrong_answers_on_any_path(
    path: str, body: str, line: int, column: int, words: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SciPy's reader would read '3 3.0 1' as A[2,2] = 0.0 and '1e400' as inf: refused, with
    the line and column, whichever path runs, with or without a comment before the entry."""
    _use(path, monkeypatch)
    for comment in ("", "% a comment\n"):
        err = _error(REAL + "3 3 2\n" + comment + body)
        shift = 1 if comment else 0
        assert err.cli_line().startswith(f"m.mtx:{line + shift}:{column}: error: "), err.cli_line()
        assert words in err.message


@pytest.mark.parametrize("path", PATHS)
def test_explicit_nan_and_infinities_are_ieee_values_on_every_path(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _use(path, monkeypatch)
    text = REAL + "3 3 5\n1 1 nan\n1 2 -inf\n2 2 Infinity\n3 3 INF\n3 1 1e-400\n"
    A = read_matrix_market_bytes(text.encode())
    dense = A.toarray()
    assert np.isnan(dense[0, 0]) and dense[0, 1] == -np.inf and dense[1, 1] == np.inf
    assert dense[2, 2] == np.inf and A.nnz == 5 and dense[2, 0] == 0.0  # 1e-400 -> 0, stored


@pytest.mark.parametrize("path", PATHS)
def test_the_paths_give_identical_matrices(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    n = 3000
    lines = [
        f"{r} {c} {float(v)!r}"
        for r, c, v in zip(
            rng.integers(1, 51, n),
            rng.integers(1, 41, n),
            rng.standard_normal(n) * 1e3,
            strict=True,
        )
    ]
    text = (REAL + f"100 100 {n}\n" + "\n".join(lines) + "\n").encode()
    _use("slow", monkeypatch)
    reference = read_matrix_market_bytes(text)
    _use(path, monkeypatch)
    A = read_matrix_market_bytes(text)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(A, name), getattr(reference, name))


@pytest.mark.parametrize("tail", [" ", "\t", "\r", " \r", "\t\t"])
def test_a_last_line_ending_in_a_blank_without_newline_never_reaches_scipy(
    tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SciPy 1.17's C++ reader dies with SIGSEGV on such a text: the fast path must not pass
    it on (a regression here kills the test process)."""
    _use("scipy", monkeypatch)
    A = read_matrix_market_bytes((REAL + "2 2 2\n1 1 1\n2 2 5" + tail).encode())
    assert A[1, 1] == 5.0 and A.nnz == 2


def test_the_scipy_reader_runs_when_enabled_and_only_on_big_bodies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    real = mm_fast.scipy.io.mmread

    def spy(source: object) -> object:
        calls.append(1)
        return real(source)

    monkeypatch.setattr(mm_fast.scipy.io, "mmread", spy)
    text = (REAL + "2 2 1\n1 1 1\n").encode()
    read_matrix_market_bytes(text)
    assert not calls  # a tiny body: one NumPy pass is faster than SciPy's thread pool
    monkeypatch.setattr(mm_fast, "SCIPY_MIN_BODY", 0)
    assert read_matrix_market_bytes(text)[0, 0] == 1.0 and calls == [1]


def test_a_flood_of_blank_lines_costs_no_memory_per_line() -> None:
    """Within the line budget of 10^7 entries, a million blank lines are skipped in C."""
    data = (REAL + "100000 100000 10000000\n").encode() + b" \n\t\r\n" * 500_000
    tracemalloc.start()
    try:
        err = _error(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "file ends after 0 of the 10000000 entries" in err.message
    assert err.location is not None and err.location.line == 1_000_003
    assert peak < 48 << 20, peak


def test_integer_fields_are_integers_within_int64() -> None:
    head = "%%MatrixMarket matrix coordinate integer general\n2 2 1\n"
    assert _error(head + "1 1 1.0\n").message.startswith("value '1.0' is not an integer")
    assert "int64 range" in _error(head + "1 1 9223372036854775808\n").message
    assert "int64 range" in _error(head + "1 1 -" + "9" * 30 + "\n").message
    A = read_matrix_market_bytes((head + "2 1 -9223372036854775807\n").encode())
    assert A[1, 0] == -9223372036854775807.0


def test_crlf_files_read_and_a_file_name_with_a_newline_stays_on_one_line() -> None:
    text = (REAL + "2 2 1\r\n2 1 4\r\n").replace("\n", "\r\n").replace("\r\r", "\r")
    assert read_matrix_market_bytes(text.encode())[1, 0] == 4.0
    err = _error(REAL + "2 2 1\n3 1 1\n", name="bad\nname.mtx")
    assert err.cli_line().startswith("bad\\nname.mtx:3:1: error: row index 3 is out of range 1..2")


# --------------------------------------------------------------------------------------------
# Sizes


@pytest.mark.usefixtures("small_host")
@pytest.mark.parametrize(
    ("size_line", "words"),
    [
        ("1099511627776 1099511627776 1000000000000", "needs about"),
        ("1099511627776 1099511627776 0", "needs about"),  # the row offsets alone
        ("100000 100000 100000000", "needs about"),
        (
            "1 1180591620717411303424 1",
            "size '1180591620717411303424' is too large (sizes are limited to 2^62)",
        ),
        ("1 1 " + "1" * 5000, "(5000 characters) is too large"),
        ("3 -3 1", "'-3' is not a non-negative integer"),
        ("3 3.0 1", "'3.0' is not a non-negative integer"),
    ],
)
def test_impossible_sizes_are_refused_before_allocation(size_line: str, words: str) -> None:
    tracemalloc.start()
    try:
        err = _error(REAL + "% c\n" + size_line + "\n1 1 1\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert words in err.message and err.cli_line().startswith("m.mtx:3:"), err.cli_line()
    assert peak < 16 << 20


def test_array_file_sizes_count_the_dense_matrix(small_host: None) -> None:
    err = _error("%%MatrixMarket matrix array real general\n100000 100000\n1\n")
    assert "declares a 100000x100000 matrix with 10000000000 stored values; reading it needs about" in err.message


# --------------------------------------------------------------------------------------------
# Bombs and floods


def _gzip_members(text: bytes, repeat: int) -> bytes:
    return gzip.compress(text, compresslevel=9) * repeat


def test_gzip_bomb_of_blank_lines_stops_at_its_budget_in_bounded_memory() -> None:
    """1 GiB of blank lines in 1 MiB of gzip: stopped after the header's line budget."""
    block = gzip.compress(b"\n" * (1 << 20), compresslevel=9)
    data = gzip.compress((REAL + "100 100 10000\n").encode()) + block * 1024
    assert len(data) < 2 << 20
    tracemalloc.start()
    started = time.perf_counter()
    try:
        err = _error(data, "bomb.mtx.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 64 << 20, peak
    assert "more than 85536 lines for a 100x100 matrix with 10000 stored entries" in err.message
    # with fewer entries declared, the compressed file alone is already too large
    small = gzip.compress((REAL + "3 3 3\n").encode()) + block * 1024
    assert "the compressed file holds 1.0 MiB, more than" in _error(small, "b.mtx.gz").message


def test_gzip_bomb_of_spaces_in_one_member_stops_at_its_text_budget() -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [compressor.compress((REAL + "1000 1000 1000\n").encode())]
    spaces = b" " * (1 << 20)
    parts += [compressor.compress(spaces) for _ in range(16)]
    parts.append(compressor.flush())
    tracemalloc.start()
    try:
        err = _error(b"".join(parts), "spaces.mtx.gz")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    budget = mm_header.HEADER_BYTES + mm_header.BYTES_PER_ENTRY * 1000
    assert "the text outgrows its size line" in err.message
    assert peak < 4 * budget + (16 << 20)


def test_gzip_of_zeros_without_a_header_is_refused_after_one_mib() -> None:
    data = _gzip_members(b"\x00" * (1 << 20), 512)  # 512 MiB of NUL bytes
    started = time.perf_counter()
    err = _error(data, "zeros.mtx.gz")
    assert time.perf_counter() - started < 2
    assert "not a Matrix Market file" in err.message or "no size line" in err.message


def test_a_header_beyond_the_first_mib_is_refused() -> None:
    text = REAL + "% padding\n" * 120_000 + "2 2 0\n"
    assert "no size line within the first 1.0 MiB" in _error(text).message
    assert "no size line within the first 1.0 MiB" in _error(gzip.compress(text.encode())).message


def test_a_flood_of_blank_lines_in_a_plain_file_is_refused() -> None:
    err = _error(REAL + "2 2 1\n" + "\n" * 70_000 + "1 1 1\n")
    assert "more than 65538 lines for a 2x2 matrix with 1 stored entries" in err.message
    assert err.location is not None and err.location.line == 65539


def test_gzip_padding_and_garbage_after_the_stream() -> None:
    packed = gzip.compress((REAL + "2 2 1\n1 2 3\n").encode())
    assert read_matrix_market_bytes(packed + b"\x00" * 512)[0, 1] == 3.0
    assert read_matrix_market_bytes(packed + packed[:0] + gzip.compress(b""))[0, 1] == 3.0
    assert "broken gzip stream" in _error(packed + b"garbage").message
    assert "broken gzip stream" in _error(packed + b"\x00" * (2 << 20)).message


# --------------------------------------------------------------------------------------------
# Files that are not files


def test_devices_pipes_and_directories_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.mtx"
    os.mkfifo(fifo)  # opening it would block until a writer came
    for path, words in [
        ("/dev/zero", "is not a regular file"),
        (str(fifo), "is not a regular file"),
        (str(tmp_path), "is a directory"),
        (str(tmp_path / "none.mtx"), "no such file"),
        (str(tmp_path / "none" / "x.mtx"), "no such file"),
    ]:
        started = time.perf_counter()
        with pytest.raises(MatrixError) as err:
            read_matrix_market(path)
        assert time.perf_counter() - started < 1
        assert err.value.cli_line().startswith(f"{path}: error: ") and words in err.value.cli_line()


def test_a_huge_sparse_file_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.mtx"
    with open(path, "wb") as handle:
        handle.write((REAL + "3 3 1\n1 1 1\n").encode())
        handle.truncate(50 << 30)  # 50 GiB, sparse: nothing is written
    started = time.perf_counter()
    with pytest.raises(MatrixError, match=r"huge.mtx:2: the file holds 50.0 GiB, more than"):
        read_matrix_market(path)
    assert time.perf_counter() - started < 1


def test_bytes_and_gzip_bytes_read_like_files(tmp_path: Path) -> None:
    text = (REAL + "% c\n2 3 2\n1 3 1.5\n2 1 -2\n").encode()
    path = tmp_path / "m.mtx.gz"
    path.write_bytes(gzip.compress(text))
    expected = read_matrix_market(path).toarray()
    np.testing.assert_array_equal(read_matrix_market_bytes(text).toarray(), expected)
    np.testing.assert_array_equal(read_matrix_market_bytes(gzip.compress(text)).toarray(), expected)
    np.testing.assert_array_equal(expected, [[0, 0, 1.5], [-2, 0, 0]])
