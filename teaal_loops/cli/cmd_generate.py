"""``teaal-loops generate``: write the CUDA kernel of a spec (no GPU and no matrix needed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from teaal_loops.cli.common import DTYPES, add_param_option, parse_params
from teaal_loops.codegen.files import output_collision, write_files
from teaal_loops.errors import Location, TeaalLoopsError
from teaal_loops.pipeline.generate import expected_files, render_spec, spec_library

ORDER = 40


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "generate",
        help="write the CUDA kernel of a spec",
        description=(
            "Render the CUDA kernel of each SPEC (a folder stands for every *.yaml spec in it "
            "and its subfolders) for the chosen layout and dtype. Without -o the source goes to "
            "standard output; -o DIR writes DIR/<spec>.<layout>.<dtype>.cu; -o NAME.cu writes "
            "one kernel (one spec, one dtype) to that file. Two specs that would write the same "
            "file are refused. --all regenerates the committed generated/ folder: every spec in "
            "specs/ in f32 and f64 (teaal-loops generate --all -o generated)."
        ),
    )
    p.add_argument(
        "specs", nargs="*", metavar="SPEC", help="spec YAML file(s), or folders of them"
    )
    p.add_argument("--all", action="store_true", help="every spec in --specs-dir, both dtypes")
    p.add_argument(
        "--specs-dir", default="specs", metavar="DIR", help="spec library for --all (default specs)"
    )
    p.add_argument("--layout", default=None, help="sparse layout (default: the spec's; csr)")
    p.add_argument(
        "--dtype",
        choices=["f32", "f64", "both"],
        default=None,
        help="value type (default f32; both with --all)",
    )
    p.add_argument(
        "--index-bits",
        type=int,
        choices=[32, 64],
        default=32,
        help="offset width: 64 for matrices with more than 2^31-1 nonzeros (default 32)",
    )
    add_param_option(p)
    p.add_argument("-o", "--output", metavar="DIR|NAME.cu",
                   help="write DIR/<spec>.<layout>.<dtype>.cu, or one kernel to NAME.cu")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    params = parse_params(args.param)
    if args.all:
        if args.specs:
            raise TeaalLoopsError("--all takes no SPEC arguments (it uses --specs-dir)")
        if params or args.layout or args.index_bits != 32:
            raise TeaalLoopsError(
                "--all regenerates the committed files with the specs' own parameters: "
                "drop --param/--layout/--index-bits"
            )
        library = spec_library(args.specs_dir)
        if not library:
            raise TeaalLoopsError(f"{args.specs_dir}: no *.yaml specs to generate")
        dtypes = _dtypes(args.dtype or "both")
        every = expected_files(args.specs_dir, dtypes)
        out = args.output or "generated"
        if _is_single_file(out):
            raise TeaalLoopsError(f"-o {out}: --all writes {len(every)} kernels: give a folder")
        for path in write_files(every, out, prune=args.dtype in (None, "both")):
            print(path)
        return 0
    if not args.specs:
        raise TeaalLoopsError("give a SPEC file (or --all)")
    rendered: dict[str, str] = {}
    writer: dict[str, str] = {}
    for spec in _expand(args.specs):
        for dtype in _dtypes(args.dtype or "f32"):
            name, source = render_spec(
                spec, dtype=dtype, layout=args.layout, params=params, index_bits=args.index_bits
            )
            if name in writer:
                raise output_collision(name, writer[name], spec)
            rendered[name], writer[name] = source, spec
    if not args.output:
        for name in rendered:
            sys.stdout.write(rendered[name])
        return 0
    if _is_single_file(args.output):
        if len(rendered) != 1:
            raise TeaalLoopsError(
                f"-o {args.output} names one file, but {len(rendered)} kernels would be written "
                f"({len(set(writer.values()))} spec(s), {len(_dtypes(args.dtype or 'f32'))} "
                "dtype(s)): give a folder"
            )
        _write_one(Path(args.output), next(iter(rendered.values())))
        print(args.output)
        return 0
    for path in write_files(rendered, args.output):
        print(path)
    return 0


def _is_single_file(output: str) -> bool:
    """``-o NAME.cu`` that is not an existing folder names one kernel file."""
    path = Path(output)
    return path.suffix == ".cu" and not path.is_dir()


def _write_one(path: Path, source: str) -> None:
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise TeaalLoopsError(f"{blocker} is not a directory", location=Location(str(path)))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    except OSError as err:
        raise TeaalLoopsError(f"cannot write: {err.strerror or err}",
                              location=Location(str(path))) from None


def _expand(paths: list[str]) -> list[str]:
    """Spec files as given, folders replaced by the ``*.yaml`` specs in them and below."""
    specs: list[str] = []
    for path in paths:
        if Path(path).is_dir():
            found = spec_library(path)
            if not found:
                raise TeaalLoopsError(f"{path}: no *.yaml specs in this folder or below")
            specs.extend(str(p) for p in found)
        else:
            specs.append(path)
    unique = {str(Path(p).resolve()): p for p in reversed(specs)}  # a spec given twice: once
    return list(reversed(unique.values()))


def _dtypes(choice: str) -> list[str]:
    return ["float32", "float64"] if choice == "both" else [DTYPES[choice]]
