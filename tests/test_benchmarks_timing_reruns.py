"""benchmarks/timing_reruns.py (issue 44): a pair passes when at most one configuration's gain interval misses the
other run's estimate and no verdict flips between "faster" and "slower" (values set by hand below)."""

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("timing_reruns", Path(__file__).resolve().parents[1] / "benchmarks" /
                                               "timing_reruns.py")
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)


def _write(d: Path, rows: list[tuple[str, float, tuple[float, float], str]]) -> Path:
    d.mkdir()
    acc = [{"run": "B16", "verdict": "reference", "relative_throughput": 1.0, "relative_throughput_ci": [1, 1]}]
    acc += [{"run": n, "relative_throughput": g, "relative_throughput_ci": list(ci), "verdict": v,
             "relative_time": 0.8, "relative_time_ci": [0.5, 1.1]} for n, g, ci, v in rows]
    (d / "report.json").write_text(json.dumps({"reference": "B16", "accounting": acc}))
    return d


def test_pair_passes_when_intervals_hold_each_other(tmp_path, capsys):
    a = _write(tmp_path / "a", [("B32", 1.4, (1.2, 1.7), "within noise"), ("B64", 1.8, (1.5, 2.1), "faster")])
    b = _write(tmp_path / "b", [("B32", 1.5, (1.3, 1.8), "faster"), ("B64", 1.7, (1.4, 2.0), "faster")])
    assert tr.main([str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 configurations" in out and "0 faster/slower flips: pass" in out


def test_flip_or_two_misses_fail(tmp_path, capsys):
    a = _write(tmp_path / "a", [("B32", 1.32, (1.21, 1.44), "within noise"), ("B64", 1.68, (1.43, 1.98), "faster"),
                                ("B2048", 1.87, (1.68, 2.08), "slower")])
    b = _write(tmp_path / "b", [("B32", 1.67, (1.50, 1.88), "faster"), ("B64", 2.10, (1.97, 2.26), "faster"),
                                ("B2048", 2.50, (2.37, 2.65), "faster")])
    assert tr.main([str(a), str(b)]) == 1          # the issue's own example: 0 of 3 hold, one flip
    out = capsys.readouterr().out
    assert "0 of 3 configurations" in out and "1 faster/slower flips: FAIL" in out
