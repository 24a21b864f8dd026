"""``rlbatch analyze`` on verl PPO logs at several B reports the critic's gradient-norm slope and knee beside the
actor's (``noise.actor`` and ``noise.critic`` in report.json).

../shared/logs/verl has one real verl PPO log (P = 256, G = 1); three logs (its first 150 steps) at B = 128, 256, 512
are derived from it by rewriting ``data.train_batch_size`` (and ``ppo_mini_batch_size`` to match: one update per
rollout) and setting the grad norms: actor = the real value x
(B/256)^-1/2 (noise-dominated scaling), critic = 20 x (B/256)^-0.05 on every step (nearly flat, as the paper finds for the critic).
"""

import json
import re

import pytest

from _shared import shared_logs
from rlbatch.analyze import analyze


def _derive(text: str, p: int) -> str:
    text = text.replace("data.train_batch_size=256", f"data.train_batch_size={p}")
    text = text.replace("'train_batch_size': 256,", f"'train_batch_size': {p},")
    # one update per rollout (mini-batch = the whole batch), so each log's update batch, the fit's B, is P
    text = text.replace("ppo_mini_batch_size=64", f"ppo_mini_batch_size={p}")
    text = text.replace("'ppo_mini_batch_size': 64", f"'ppo_mini_batch_size': {p}")
    f = p / 256
    text = re.sub(r"actor/grad_norm:([0-9.eE+-]+)", lambda m: f"actor/grad_norm:{float(m.group(1)) * f ** -0.5:.6g}",
                  text)
    return re.sub(r"critic/grad_norm:([0-9.eE+-]+)", lambda m: f"critic/grad_norm:{20 * f ** -0.05:.6g}", text)


def test_analyze_ppo_logs_report_actor_and_critic_fits(tmp_path):
    src = shared_logs("verl", module=False) / "qwen2.5-0.5b_gsm8k_ppo_p256.log"
    text = src.read_text(encoding="utf-8", errors="replace")
    text = text[:text.index("step:150 -")]  # the first 150 steps keep the test fast
    paths = []
    for p in (128, 256, 512):
        path = tmp_path / f"qwen2.5-0.5b_gsm8k_ppo_p{p}.log"
        path.write_text(_derive(text, p), encoding="utf-8")
        paths.append(path)
    res = analyze(paths, out=tmp_path / "report")
    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    noise = rep["noise"]
    actor, critic = noise["actor"], noise["critic"]
    assert actor is not None and critic is not None
    assert sorted(p["batch_size"] for p in critic["points"]) == [128, 256, 512]
    # set exactly above: 2^-0.05 = 0.966 per doubling departs from 1/sqrt(2) at once, so the critic's knee is the
    # smallest B and its slope over all points is -0.05
    assert critic["slope_all"] == pytest.approx(-0.05, abs=1e-3)
    assert critic["knee_batch"] == 128
    assert -0.8 < actor["slope_all"] < -0.2  # real per-step norms over the matched sample window, x B^-1/2
    assert "knee_batch" in actor
    md = (tmp_path / "report" / "report.md").read_text()
    assert "critic" in md.lower()
    assert res["warnings"] is not None
