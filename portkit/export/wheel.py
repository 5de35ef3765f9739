"""Write a pure-Python wheel by hand (a zip with a ``.dist-info``), so an exported package
installs with ``pip install --no-index`` on a machine without network or setuptools."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

from portkit.export.names import GENERATOR


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def write_wheel(dist: Path, package_dir: Path, name: str, version: str) -> Path:
    dist.mkdir(parents=True, exist_ok=True)
    wheel = dist / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    metadata = (
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        f"Summary: Custom GPU ops exported by portkit\nRequires-Python: >=3.10\n"
        f"Requires-Dist: torch<2.14,>=2.4\nRequires-Dist: cuda-bindings>=12.8\n"
    )
    files = {
        f"{name}/{p.relative_to(package_dir).as_posix()}": p.read_bytes()
        for p in sorted(package_dir.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    files[f"{info}/METADATA"] = metadata.encode()
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\n{GENERATOR}\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel
