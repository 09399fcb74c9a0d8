"""``teaal-loops launch -n P -- COMMAND ...``: one rank per GPU on this host, without MPI."""

from __future__ import annotations

import argparse
import sys

from teaal_loops.distributed import launch as launcher
from teaal_loops.errors import ParameterError

ORDER = 52


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "launch",
        help="start P ranks of a teaal-loops command on this host, one a GPU (no MPI)",
        description=(
            "Start P processes of 'teaal-loops COMMAND ...', e.g. 'teaal-loops launch -n 2 -- "
            "run SPEC --synthetic ... --distributed --rigorous'. Each rank gets its rank, the "
            "world size, its GPU id and a private directory for host messages in "
            "TEAAL_LOOPS_* variables, and NCCL_NVLS_ENABLE=0; every GPU stays visible (NCCL "
            "needs that for CUDA IPC over NVLink). Exits with the first failing rank's status. "
            "Across hosts use 'mpiexec -n P teaal-loops run ... --distributed' instead."
        ),
    )
    launcher.add_arguments(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...",
                   help="the teaal-loops command each rank runs (after --)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise ParameterError("launch: give the command after --, e.g. -- run SPEC ... "
                             "--distributed")
    devices = launcher.parse_devices(args.devices, args.ranks)
    return launcher.launch([sys.executable, "-m", "teaal_loops", *command], args.ranks,
                           devices=devices, timeout_s=args.timeout)
