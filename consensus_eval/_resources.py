"""Locate the data files that ship with the package (prompts, configs, rubrics, examples).

In a wheel they live in ``consensus_eval/_data/``; in a source checkout or an editable install
they are the top-level folders of the repository. Either way, callers ask for them by name.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


@cache
def data_dir(name: str) -> Path:
    """Return the folder holding the bundled ``name`` files (``prompts``, ``configs``, ``examples``)."""
    for candidate in (_PACKAGE_DIR / "_data" / name, _PACKAGE_DIR.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"bundled folder {name!r} not found next to the package ({_PACKAGE_DIR}); "
        "reinstall consensus-eval"
    )


def resolve(path: str | Path, kind: str) -> Path:
    """Resolve a user path; if it does not exist, look for it among the bundled ``kind`` files.

    ``resolve("configs/default.yaml", "configs")`` works from any directory after ``pip install .``.
    """
    p = Path(path)
    if p.exists():
        return p
    parts = p.parts
    rel = Path(*parts[1:]) if parts and parts[0] == kind else p
    bundled = data_dir(kind) / rel
    if bundled.exists():
        return bundled
    return p  # let the caller report the missing file with the user's own spelling
