"""Where a benchmark's command starts: the bench's paths and the project's python.

Every command of bench/ begins the same way, with nothing but the standard library::

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))
    from entry import ensure_project_python
    ensure_project_python("bench/NAME", "psutil")

so that it runs with any python: one that cannot import what it needs re-executes the
command with the project's venv (``.venv/bin/python``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

LIB_DIR = Path(__file__).resolve().parent
BENCH_DIR = LIB_DIR.parent
ROOT = BENCH_DIR.parent
PROJECT_PYTHON = ROOT / ".venv" / "bin" / "python"


def ensure_project_python(prog: str, *modules: str) -> None:
    """Re-exec this command with the project's venv unless this python imports
    crawler_tasks and ``modules``; exit saying what is missing when even that one lacks them."""
    missing = [name for name in ("crawler_tasks", *modules) if importlib.util.find_spec(name) is None]
    if not missing:
        return
    if PROJECT_PYTHON.exists() and not os.environ.get("CRAWLER_BENCH_REEXEC"):
        os.environ["CRAWLER_BENCH_REEXEC"] = "1"
        os.execv(str(PROJECT_PYTHON), [str(PROJECT_PYTHON), os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    if "crawler_tasks" in missing:
        sys.exit(f"{prog}: crawler_tasks does not import with {sys.executable}; "
                 f"run it with {PROJECT_PYTHON} (or activate the project venv)")
    sys.exit(f"{prog}: {', '.join(missing)} missing: {sys.executable} -m pip install {' '.join(missing)}")
