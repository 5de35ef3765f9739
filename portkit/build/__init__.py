"""The build: what ``portkit check`` runs first and ``export``, ``lint`` and ``compile``
rely on, without a GPU. The prototype's kernels compiled to PTX and the twin compiled
for each of the project's archs (``compile_checks.py``), the twin's parameters held
against the launches (``signature.py``), what a finding is (``finding.py``), and the
twin's cubins per architecture for an exported package (``archs.py``). The compilers and
their caches are the backends' (``backends/twin/build.py``, ``backends/ptx.py``)."""
