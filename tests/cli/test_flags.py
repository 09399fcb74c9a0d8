"""Bad flags are one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import pytest

from teaal_loops.cli import main
from tests.conftest import REPO

SPEC = str(REPO / "specs" / "thread_mapped.yaml")
SYNTH = "uniform:rows=20,cols=20,nnz=60,seed=1"


@pytest.mark.parametrize("seed", ["-1", "1e3", "9" * 30, "x", str(2**62 + 1)])
def test_a_bad_seed_is_one_line(capsys: pytest.CaptureFixture[str], seed: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(["check", SPEC, "--synthetic", SYNTH, "--seed", seed])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--seed" in err and "Traceback" not in err


def test_a_good_seed_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", SPEC, "--synthetic", SYNTH, "--seed", str(2**62)]) == 0
    assert "result: AGREE" in capsys.readouterr().out


def test_an_unknown_flag_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["explain", SPEC, "--no-such-flag"])
    assert info.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize("value, ok", [("1e8", True), ("2.5e5", True), ("1.5e0", False),
                                       ("-3", False), ("1e400", False), ("lots", False)])
def test_check_max_nnz_takes_counts_in_scientific_notation(
    capsys: pytest.CaptureFixture[str], value: str, ok: bool
) -> None:
    rc = main(["check", SPEC, "--synthetic", SYNTH, "--max-nnz", value])
    captured = capsys.readouterr()
    if ok:
        assert rc == 0 and "result: AGREE" in captured.out
    else:
        assert rc == 2 and "--max-nnz" in captured.err
        assert len(captured.err.strip().splitlines()) == 1
