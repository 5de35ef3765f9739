"""``portkit port``: a readable, templated C CUDA draft of an op's numba kernels.

The kernels are read from their Python source (the AST, through inspect) and typed by
numba for every signature the op's cases launch; a variable whose type follows the
input dtype becomes a template parameter, a fixed type stays fixed. docs/port.md has
the subset it translates and what a person still does by hand.
"""
