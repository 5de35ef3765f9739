"""The notebook API: ``portkit.check``, ``portkit.sim`` and ``portkit.diff`` (calls.py),
which run ``portkit watch``'s engine on a session kept per project (sessions.py) and
return results that print as the CLI's tables and expose what failed (reports.py)."""

from portkit.api.calls import check, diff, sim
from portkit.api.reports import CheckReport, DiffReport, Report

__all__ = ["CheckReport", "DiffReport", "Report", "check", "diff", "sim"]
