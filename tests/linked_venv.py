"""A venv of its own whose site-packages links this environment's packages: a job's torch with
no second install of 800 MB (tests/integration/test_separate_install.py, tests/gpu/)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path


def requires(names: tuple[str, ...]) -> list[importlib.metadata.Distribution]:
    """The installed distributions ``names`` and everything they require, extras aside."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in found:
            continue
        try:
            found[name] = dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a requirement for another platform or Python
        todo += [
            re.split(r"[ ;<>=!~\[(]", r, maxsplit=1)[0]
            for r in dist.requires or ()
            if "extra ==" not in r
        ]
    return list(found.values())


def linked_venv(path: Path, *names: str) -> Path:
    """A venv at ``path`` whose site-packages links ``names`` and what they require; gputop is
    not among them (a requirement's ``.pth`` files are not linked either: an editable install's
    would put a checkout on the venv's path). Returns its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300
    )
    (site,) = (path / "lib").glob("python*/site-packages")
    for dist in requires(names):
        tops = {
            f.parts[0]
            for f in dist.files or ()
            if f.parts[0] not in ("..", "__pycache__") and not f.name.endswith(".pth")
        }
        for top in tops:
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (site / top).exists():
                (site / top).symlink_to(target)
    return path / "bin" / "python"
