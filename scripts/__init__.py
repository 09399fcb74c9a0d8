"""Maintainer conveniences, run from the repository root: the notebook generators
(``python -m scripts.make_dense_notebooks``, ``python scripts/make_notebooks.py``,
``python scripts/make_solver_notebook.py``) and the GPU validation run
(``scripts/gpu_validation.sh``). A package so that a generator split over several modules
imports its parts by name, without editing ``sys.path``."""
