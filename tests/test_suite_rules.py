"""The suite's skip rule (tests/conftest.py): a skip that names neither a missing optional dependency nor an absent
../shared/logs folder (in the words tests/_shared.py uses) fails the run; a slow test is deselected, not skipped."""

import shutil
import subprocess
import sys
from pathlib import Path

CASES = '''
import pytest

def test_optional_dependency_missing():
    pytest.skip("frobnicate is not installed (pip install frobnicate)")

def test_importorskip():
    pytest.importorskip("surely_not_a_module_xyz")

def test_data_missing():
    pytest.skip("../shared/logs not present")

def test_shared_logs_absent():
    pytest.skip("../shared/logs/cases3 is absent: third-party logs are read from beside the repository")

@pytest.mark.xfail(reason="known")
def test_expected_failure():
    assert False

@pytest.mark.slow
def test_slow():
    pass
'''


def test_skip_rule_and_slow_deselection(tmp_path):
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_cases.py").write_text(CASES)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA",
                        str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    tail = r.stdout.strip().splitlines()[-1]
    assert r.returncode == 1, r.stdout
    assert "1 failed" in tail and "3 skipped" in tail and "1 xfailed" in tail and "1 deselected" in tail, tail
    assert "FAILED test_cases.py::test_data_missing" in r.stdout
    assert "not a missing optional dependency (Skipped: ../shared/logs not present)" in r.stdout
