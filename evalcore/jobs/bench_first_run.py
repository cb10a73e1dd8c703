"""evalcore bench --shape first-run: a newcomer's first minutes, as whole processes (README, Install).

What README's install paragraph quotes, measured the way a newcomer meets it:

- ``pip install -e .`` and ``pip install -e ".[test]"`` of this checkout, each into a new virtual
  environment made by ``python -m venv`` (the venv's creation included), alternated pair by pair;
  pip's own wheel cache is used as pip uses it by default (the figure says so: a machine that never
  downloaded the wheels spends its network's time on top);
- ``evalcore demo`` run first with an empty kernel cache (numba compiles, as on a new clone: a fresh
  ``NUMBA_CACHE_DIR``) and then again with that cache filled, alternated pair by pair, in the first
  environment, so the demo's figures are the installed command's, start to exit.

Every figure is a median with its min-max over ``--repeat`` runs (default 3), printed with the date.
"""
from __future__ import annotations

import datetime
import itertools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from evalcore.errors import OptionError
from evalcore.jobs.bench import whole_process
from evalcore.jobs.common import parse_number
from evalcore.jobs.timing import alternate

#: the runs of each figure when --repeat is not given: a pip install takes about a minute
DEFAULT_REPEAT = 3


def checkout() -> Path:
    """The source checkout this evalcore runs from (where pyproject.toml is): what a newcomer installs."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise OptionError("--shape", f"first-run installs a source checkout, and {root} has no pyproject.toml "
                                     "(this evalcore was installed from a wheel)")
    return root


def timed_install(folder: Path, target: str) -> float:
    """Seconds of ``python -m venv FOLDER`` then ``FOLDER/bin/pip install --quiet -e TARGET``, as one figure."""
    seconds = whole_process([sys.executable, "-m", "venv", str(folder)])
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    return seconds + whole_process([*pip, "-e", target])


def run(args) -> int:
    repeat = parse_number("--repeat", str(getattr(args, "repeat", None) or DEFAULT_REPEAT), int)
    if repeat < 1:
        raise OptionError("--repeat", f"{repeat} must be at least 1")
    root = checkout()
    today = datetime.date.today().isoformat()
    print(f"shape first-run ({today}): {root} installed into new virtual environments ({sys.executable} -m venv), "
          f"then evalcore demo; {repeat} runs of each, alternated", flush=True)
    with tempfile.TemporaryDirectory(prefix="evalcore-first-run-") as tmp:
        work = Path(tmp)
        made = itertools.count()
        installs = alternate(lambda: timed_install(work / f"plain-{next(made)}", str(root)),
                             lambda: timed_install(work / f"test-{next(made)}", f"{root}[test]"), repeat)
        print(f"  python -m venv + pip install -e .          {installs.first.text()}   (pip's wheel cache as found)",
              flush=True)
        print(f"  python -m venv + pip install -e \".[test]\"  {installs.second.text()}", flush=True)
        env = work / "plain-0"
        evalcore = str(env / "bin" / "evalcore")
        warm_cache = work / "numba-warm"
        cold = itertools.count()

        def demo(cache: Path) -> float:
            out = work / "demo"
            return whole_process([evalcore, "demo", "--out", str(out)],
                                 env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})

        demo(warm_cache)   # fills the warm cache once
        demos = alternate(lambda: demo(work / f"numba-cold-{next(cold)}"), lambda: demo(warm_cache), repeat)
        print(f"  evalcore demo, first run (empty kernel cache) {demos.first.text()}", flush=True)
        print(f"  evalcore demo, again                        {demos.second.text()}   first / again = "
              f"{demos.ratio_text()}", flush=True)
        version = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "--version"], capture_output=True,
                                 text=True).stdout.split(" from ")[0]
        print(f"  ({version}; {os.cpu_count()} CPUs)", flush=True)
    return 0
