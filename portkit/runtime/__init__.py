"""The one twin runtime: what portkit's twin backend and an exported package both run.

Everything in this folder imports only the standard library, torch and cuda.bindings,
and each module imports its siblings relatively: ``portkit export`` copies the folder
byte for byte into a package as ``_runtime/``, and the package's launchers see this
module as ``portkit`` (``portkit.cdiv``, ``portkit.sm_count``, ``portkit.knobs``,
``portkit.InputError``:
the launch contract's ``LAUNCHER_NAMES``). docs/design.md maps the modules.
"""

from .knob_choice import knobs as knobs
from .launch_contract import InputError as InputError
from .launch_contract import LaunchError as LaunchError
from .launch_contract import OpDefinitionError as OpDefinitionError
from .launch_contract import PortkitError as PortkitError
from .launch_contract import cdiv as cdiv
from .launch_contract import sm_count as sm_count
