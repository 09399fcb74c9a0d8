"""Matrix Market reading on small files written here, valid and broken."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import pytest

from teaal_loops.errors import MatrixError
from teaal_loops.matrix import mm_fast, mm_scan, mmio, read_matrix_market
from teaal_loops.matrix.mm_header import Source, parse_header


@pytest.fixture(autouse=True, params=["scipy-tier", "numpy-tier", "slow-only"])
def reader_tier(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run every test with SciPy's C++ reader, with the NumPy reader, and line by line only."""
    monkeypatch.setattr(mm_fast, "SCIPY_MIN_BODY", 0)  # SciPy's reader even on tiny files
    if request.param == "numpy-tier":
        monkeypatch.setattr(mm_fast, "HAVE_SCIPY_READER", False)
    if request.param == "slow-only":
        monkeypatch.setattr(mmio, "USE_FAST_PATH", False)
    return str(request.param)


def _write(tmp_path: Path, text: str, name: str = "m.mtx", compress: bool = False) -> Path:
    path = tmp_path / name
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def _dense(path: Path) -> np.ndarray:
    A = read_matrix_market(path)
    assert A.format == "csr" and A.dtype == np.float64
    assert A.has_sorted_indices
    return A.toarray()


GENERAL = """%%MatrixMarket matrix coordinate real general
% a comment
%
3 4 5
1 1 1.5
3 4 -2e-1
1 3 2
2 2 0
1 3 0.5
"""


def test_general_real_sums_duplicates_keeps_explicit_zeros_and_sorts(tmp_path: Path) -> None:
    A = read_matrix_market(_write(tmp_path, GENERAL))
    assert A.shape == (3, 4)
    expected = np.zeros((3, 4))
    expected[0, 0], expected[2, 3], expected[0, 2] = 1.5, -0.2, 2.5
    np.testing.assert_allclose(A.toarray(), expected)
    assert A.nnz == 4  # (1,3) merged; the stored zero at (2,2) stays part of the structure
    assert list(A.indices[A.indptr[0] : A.indptr[1]]) == [0, 2]
    assert 1 in A.indices[A.indptr[1] : A.indptr[2]]


def test_gzip_gives_the_same_matrix(tmp_path: Path) -> None:
    plain = _dense(_write(tmp_path, GENERAL))
    packed = _dense(_write(tmp_path, GENERAL, "m.mtx.gz", compress=True))
    np.testing.assert_array_equal(plain, packed)


def test_symmetric_is_expanded_without_doubling_the_diagonal(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 2\n2 2 -1\n"
    expected = np.array([[4.0, 0, 2], [0, -1, 0], [2, 0, 0]])
    np.testing.assert_array_equal(_dense(_write(tmp_path, text)), expected)


def test_skew_symmetric_mirrors_negated(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 2 -1.5\n"
    expected = np.array([[0, -5.0, 0], [5, 0, 1.5], [0, -1.5, 0]])
    np.testing.assert_array_equal(_dense(_write(tmp_path, text)), expected)


def test_skew_symmetric_diagonal_entry_is_an_error_with_its_line(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 5\n3 3 1\n"
    with pytest.raises(MatrixError) as err:
        read_matrix_market(_write(tmp_path, text))
    assert err.value.location is not None and err.value.location.line == 4


def test_pattern_values_are_one_and_symmetric_pattern_expands(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n4 4\n4 2\n"
    dense = _dense(_write(tmp_path, text))
    expected = np.zeros((4, 4))
    for r, c in [(1, 0), (0, 1), (3, 3), (3, 1), (1, 3)]:
        expected[r, c] = 1.0
    np.testing.assert_array_equal(dense, expected)


def test_integer_field_and_real_hermitian(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 -7\n2 1 3\n"
    np.testing.assert_array_equal(_dense(_write(tmp_path, text)), [[0, -7], [3, 0]])
    text = "%%MatrixMarket matrix coordinate real hermitian\n2 2 2\n2 1 3\n1 1 1\n"
    np.testing.assert_array_equal(_dense(_write(tmp_path, text, "h.mtx")), [[1, 3], [3, 0]])


def test_array_general_is_column_major_and_drops_zeros(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix array real general\n2 3\n1\n2\n0\n4\n5\n6\n"
    A = read_matrix_market(_write(tmp_path, text))
    np.testing.assert_array_equal(A.toarray(), [[1, 0, 5], [2, 4, 6]])
    assert A.nnz == 5


def test_array_symmetric_stores_the_lower_triangle_by_columns(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n"
    expected = [[1, 2, 3], [2, 4, 5], [3, 5, 6]]
    np.testing.assert_array_equal(_dense(_write(tmp_path, text)), expected)


def test_blank_lines_and_comments_in_the_body_are_tolerated(tmp_path: Path) -> None:
    text = "%%MatrixMarket matrix coordinate real general\n2 2 2\n\n1 1 1\n% note\n2 2 2\n\n"
    np.testing.assert_array_equal(_dense(_write(tmp_path, text)), [[1, 0], [0, 2]])


def test_empty_matrix(tmp_path: Path) -> None:
    A = read_matrix_market(
        _write(tmp_path, "%%MatrixMarket matrix coordinate real general\n3 2 0\n")
    )
    assert A.shape == (3, 2) and A.nnz == 0


HEADER = "%%MatrixMarket matrix coordinate real general\n% c\n3 3 3\n"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("hello\n3 3 0\n", 1, "not a Matrix Market"),
        ("%%MatrixMarket matrix coordinate real\n3 3 0\n", 1, "banner"),
        ("%%MatrixMarket matrix coordinate complex general\n1 1 0\n", 1, "complex"),
        ("%%MatrixMarket matrix coordinate real weird\n1 1 0\n", 1, "symmetry"),
        ("%%MatrixMarket matrix coordinate real general\n% c\n3 x 1\n", 3, "size line"),
        ("%%MatrixMarket matrix coordinate real general\n% only comments\n", 3, "size line"),
        ("%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n", 2, "square"),
        (HEADER + "1 1 1\n2 2 2\n", 6, "file ends after 2 of the 3"),
        (HEADER + "1 1 1\n2 2 2\n3 3 3\n1 2 4\n", 7, "more entries"),
        (HEADER + "1 1 1\n0 2 2\n3 3 3\n", 5, "row index 0 is out of range 1..3"),
        (HEADER + "1 1 1\n2 2 2\n3 4 3\n", 6, "column index 4 is out of range 1..3"),
        (HEADER + "1 1 1\n2 2 abc\n3 3 3\n", 5, "'abc' is not a valid number"),
        (HEADER + "1 1 1\n2 2\n3 3 3\n", 5, "expected 3 value(s)"),
        (HEADER + "1 1 1 7\n2 2 2\n3 3\n", 4, "expected 3 value(s)"),
        (HEADER + "1 1 1\n2.5 2 2\n3 3 3\n", 5, "row index '2.5' is not an integer"),
        ("%%MatrixMarket matrix coordinate integer general\n1 1 1\n1 1 0.5\n", 3, "not an integer"),
        (HEADER + "1 1 1\n2 2 1-2\n3 3 3\n", 5, "not a valid number"),
        (HEADER + "1 1 1\n2 2 0x10\n3 3 3\n", 5, "not a valid number"),
        (HEADER + "1 1 1\n2 2 2\n3 3 1.5x\n", 6, "not a valid number"),
        (HEADER + "1 1 1\n2 2 1e\n3 3 3\n", 5, "not a valid number"),
        (HEADER + "1 1 1\n2 2 1.2.3\n3 3 3\n", 5, "not a valid number"),
        (HEADER + "1 1 1\n2 2 2\n3 3 1e2e3\n", 6, "not a valid number"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1 5\n2 2\n", 3, "found 3"),
        ("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 1\n2 2 -\n", 4, "not an integer"),
    ],
)
def test_broken_files_name_the_file_and_line(
    tmp_path: Path, text: str, line: int, words: str
) -> None:
    path = _write(tmp_path, text, "broken.mtx")
    with pytest.raises(MatrixError) as err:
        read_matrix_market(path)
    assert err.value.location is not None
    assert err.value.location.line == line, err.value.cli_line()
    assert str(path) in err.value.cli_line() and f":{line}:" in err.value.cli_line()
    assert words in err.value.message


def test_broken_gzip_body_reports_the_same_line_as_plain(tmp_path: Path) -> None:
    text = HEADER + "1 1 1\n2 2 abc\n3 3 3\n"
    with pytest.raises(MatrixError) as err:
        read_matrix_market(_write(tmp_path, text, "b.mtx.gz", compress=True))
    assert err.value.location is not None and err.value.location.line == 5


def test_truncated_gzip_names_the_line_where_the_text_stops(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 20000
    rows = rng.integers(1, 1001, n)
    cols = rng.integers(1, 1001, n)
    body = "".join(f"{r} {c} {v:.17g}\n" for r, c, v in zip(rows, cols, rng.random(n), strict=True))
    text = f"%%MatrixMarket matrix coordinate real general\n1000 1000 {n}\n{body}"
    packed = gzip.compress(text.encode())
    cut = packed[: len(packed) // 2]
    path = tmp_path / "t.mtx.gz"
    path.write_bytes(cut)
    partial = zlib.decompressobj(wbits=31).decompress(cut)
    with pytest.raises(MatrixError) as err:
        read_matrix_market(path)
    assert "gzip" in err.value.message
    assert err.value.location is not None
    assert err.value.location.line == partial.count(b"\n") + 1


def test_values_the_fast_tiers_do_not_take_still_read_correctly(tmp_path: Path) -> None:
    text = HEADER + "1 1 nan\n2 2 -inf\n3 3 +.5e-1\n"
    dense = _dense(_write(tmp_path, text))
    assert np.isnan(dense[0, 0]) and dense[1, 1] == -np.inf and dense[2, 2] == 0.05


def _scan_header(field: str, entries: int) -> bytes:
    return f"%%MatrixMarket matrix coordinate {field} general\n9 9 {entries}\n".encode()


PLAIN_LINES = [b"1 2 -5e+6", b"3 1 .5", b"2 2 9.25", b"1 3 7.", b"4 4\t1E-3\r", b"5 5 +12"] * 4


@pytest.mark.parametrize(
    "bad",
    [
        b"1 2 7-8", b"1 2 8e", b"1 2 x", b"1 2 123.456.7", b"1 2 1.4e5e7", b"1 2 1e5.2",
        b"1 2.0 3", b"1e0 2 3", b"+1 2 3", b"1 -2 3", b"1 2", b"1 2 3 4", b"1 2 3\r4", b"1 2 .",
        b"1 2 +.e1", b"1\x0b2 3", b"1 2 nan", b"% note", b"1 2 3\r\r", b"1 2 --3", b"1 2 3e+",
        b"1234567890123456789 2 3", b"1 2 " + b"1" * 65,
    ],
)
def test_plain_scan_refuses_what_is_not_plain_in_any_chunk(
    bad: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan proves a body plain across chunk boundaries, and refuses every irregularity."""
    monkeypatch.setattr(mm_scan, "CHUNK", 24)
    text = _scan_header("real", len(PLAIN_LINES)) + b"\n".join(PLAIN_LINES) + b"\n"
    header = parse_header(text, Source("t"), complete=True)
    assert mm_scan.is_plain(text, header)
    for where in (0, 11, len(PLAIN_LINES) - 1):
        lines = list(PLAIN_LINES)
        lines[where] = bad
        broken = _scan_header("real", len(lines)) + b"\n".join(lines) + b"\n"
        assert not mm_scan.is_plain(broken, header), (where, bad)


def test_plain_scan_field_rules() -> None:
    for field, line, plain in [
        ("integer", b"1 2 -7", True),
        ("integer", b"1 2 7.0", False),
        ("integer", b"1 2 " + b"9" * 19, False),
        ("pattern", b"1 2", True),
        ("pattern", b"1 -2", False),
        ("real", b"1 2 3", True),
    ]:
        text = _scan_header(field, 1) + line + b"\n"
        header = parse_header(text, Source("t"), complete=True)
        assert mm_scan.is_plain(text, header) is plain, (field, line)


def test_missing_file_is_a_matrix_error(tmp_path: Path) -> None:
    with pytest.raises(MatrixError, match="no such file"):
        read_matrix_market(tmp_path / "nope.mtx")
