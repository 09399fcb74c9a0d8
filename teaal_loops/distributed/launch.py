"""One process per GPU on one host, without MPI.

``python -m teaal_loops.distributed.launch -n P [--devices 0,1,...] -- COMMAND ...`` (or
``teaal-loops launch -n P -- run SPEC ... --distributed``) starts ``P`` copies of ``COMMAND``.
Each gets ``TEAAL_LOOPS_RANK``, ``TEAAL_LOOPS_WORLD_SIZE``, ``TEAAL_LOOPS_LOCAL_RANK``,
``TEAAL_LOOPS_LOCAL_SIZE``, ``TEAAL_LOOPS_DEVICE`` (its GPU) and ``TEAAL_LOOPS_STORE`` (a private
directory for the host messages of :class:`teaal_loops.distributed.world.FileChannel`), and
always ``NCCL_NVLS_ENABLE=0``, whatever the caller's environment says.

Every GPU stays visible to every rank and each selects its own by id: hiding the others with
``CUDA_VISIBLE_DEVICES`` would keep NCCL from using CUDA IPC between the processes, and so from
NVLink (NVIDIA's NCCL maintainers say so in NVIDIA/nccl issue 129).

The launcher waits for every rank; when one fails it stops the others (its own children, by
process id) and returns the first failure's exit status; it removes the store at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

from teaal_loops.distributed import world as w
from teaal_loops.distributed.errors import DistributedError
from teaal_loops.distributed.partition import MAX_PARTS

POLL_S = 0.05
STOP_GRACE_S = 10.0


def parse_devices(text: str | None, ranks: int) -> list[int]:
    """``--devices 0,1,...`` (one id a rank, each in 0..1023), or ``0 .. P-1``."""
    if text is None:
        return list(range(ranks))
    items = [t.strip() for t in text.split(",")]
    if len(items) != ranks or not all(t.isdigit() and int(t) <= 1023 for t in items):
        raise DistributedError(
            f"--devices {text[:60]!r}: expected {ranks} comma-separated GPU ids"
        )
    return [int(t) for t in items]


def rank_environment(
    base: Mapping[str, str], rank: int, ranks: int, device: int, store: str
) -> dict[str, str]:
    """The environment of rank ``rank`` (module docstring)."""
    env = dict(base)
    env.update({
        w.ENV_RANK: str(rank),
        w.ENV_SIZE: str(ranks),
        w.ENV_LOCAL_RANK: str(rank),
        w.ENV_LOCAL_SIZE: str(ranks),
        w.ENV_DEVICE: str(device),
        w.ENV_STORE: store,
    })
    w.disable_nvls(env)
    return env


def launch(
    command: Sequence[str],
    ranks: int,
    *,
    devices: Sequence[int] | None = None,
    environ: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> int:
    """Run ``command`` as ``ranks`` ranks; the first failing rank's exit status, else 0."""
    if not command:
        raise DistributedError("launch: no command to run")
    if not 1 <= ranks <= MAX_PARTS:
        raise DistributedError(f"launch: -n {ranks} must be in 1..{MAX_PARTS}")
    devices = list(devices) if devices is not None else list(range(ranks))
    store = tempfile.mkdtemp(prefix="teaal-loops-ranks-")  # mode 0700
    base = dict(os.environ if environ is None else environ)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(ranks):
            env = rank_environment(base, rank, ranks, devices[rank], store)
            procs.append(subprocess.Popen(list(command), env=env))
        return _wait(procs, timeout_s)
    finally:
        _stop(procs)
        shutil.rmtree(store, ignore_errors=True)


def _wait(procs: list[subprocess.Popen[bytes]], timeout_s: float | None) -> int:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            return int(failed[0])
        if all(c == 0 for c in codes):
            return 0
        if deadline is not None and time.monotonic() > deadline:
            print(f"launch: the ranks ran past {timeout_s:.0f} s; stopping them",
                  file=sys.stderr)
            return 124
        time.sleep(POLL_S)


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate the ranks still running (each by its own process id), then kill them."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in running:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def build_parser(prog: str = "python -m teaal_loops.distributed.launch") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command each rank runs")
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--ranks", type=int, required=True, metavar="P",
                        help="processes to start, one a GPU")
    parser.add_argument("--devices", metavar="IDS",
                        help="the GPU of each rank, comma-separated (default 0,1,...,P-1)")
    parser.add_argument("--timeout", type=float, default=None, metavar="S",
                        help="stop every rank after S seconds (exit status 124)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    try:
        devices = parse_devices(args.devices, args.ranks)
        return launch(command, args.ranks, devices=devices, timeout_s=args.timeout)
    except DistributedError as err:
        print(err.cli_line(), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
