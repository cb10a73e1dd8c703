"""What `pip install` puts on the path: the evalcore package and its command, nothing else."""
import subprocess
import sys
from pathlib import Path


def test_only_evalcore_is_importable_outside_the_repository(tmp_path):
    probe = ("import importlib.util as u; "
             "print(u.find_spec('evalcore') is not None, u.find_spec('jobs') is None)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr


def test_the_command_runs_from_the_package():
    exe = Path(sys.executable).with_name("evalcore")
    done = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "evaluate" in done.stdout
    text = exe.read_text()
    assert "evalcore.cli.main" in text and "jobs" not in text.replace("evalcore.jobs", "")
