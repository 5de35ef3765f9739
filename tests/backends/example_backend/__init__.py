"""A worked third-party backend (docs/add-a-backend.md): ``example-cpu``."""
