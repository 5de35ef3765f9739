"""The sanitizer tier: ``portkit check OP --sanitize TOOL`` reruns the GPU checks under
NVIDIA compute-sanitizer and parses what it reports (layer: above ``check``, below ``cli``)."""
