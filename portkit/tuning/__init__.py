"""``portkit tune``: search an op's declared knobs on this machine's GPU (``search``:
which configurations; ``runner``: timing and checking them with bench's runner). The
table it writes is ``portkit.project.tuning_table``; launchers read it through
``portkit.runtime.knob_choice``."""
