"""Maintainer conveniences, run from the repository root: the notebook generators
(``python -m scripts.make_notebooks``, ``python -m scripts.make_dense_notebooks``,
``python -m scripts.make_solver_notebook``, which share ``notebook_files.write_or_check``) and
the GPU validation run
(``scripts/gpu_validation.sh``). A package so that a generator split over several modules
imports its parts by name, without editing ``sys.path``."""
