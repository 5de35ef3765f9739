"""``portkit mutate``: mutants of an op's twin (c_operators.py) and prototype kernels
(py_operators.py), run against the op's cases (runner.py) and reported (report.py)."""
