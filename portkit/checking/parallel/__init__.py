"""``portkit check -j N``: ops checked in N worker processes at once, spread over the
machine's GPUs (one ``CUDA_VISIBLE_DEVICES`` per worker, round robin) and cores, merged
into the one table ``-j 1`` prints.

``gpus.py`` which GPUs and threads a worker gets; ``handoff.py`` what a worker hands back
per op (a versioned JSON file) and the rows merged in the suite's order; ``worker.py``
the child (``python -m portkit.checking.parallel.worker``), which runs the harness one
op at a time; ``pool.py`` the parent, which feeds ops to the workers and turns a worker
that dies into a failed row for the op it was checking.
"""
