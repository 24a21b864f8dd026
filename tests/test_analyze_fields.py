"""The per-run fields (step source, schedule, resumed logs, ...) reach `rlbatch analyze --format json` (added beside the stable ones)."""


from _shared import shared_logs
from rlbatch.analyze import analyze


def test_verl_ppo_console_fields():
    # ../shared/logs/verl/qwen2.5-0.5b_gsm8k_ppo_p256.log: no rollout.n in the printed config (verl's default G = 1),
    # actor lr 1e-6 on every step (constant schedule)
    run = analyze([shared_logs("verl", module=False) / "qwen2.5-0.5b_gsm8k_ppo_p256.log"])["runs"][0]
    assert run["group_size"] == 1 and run["group_size_source"] == "verl default"
    assert run["lr"] == 1e-6 and run["lr_schedule"]["decay"] == "constant"
    assert run["steps"] == 435  # unchanged field


def test_resumed_prime_rl_fields():
    # ../shared/logs/real/primerl_orchestrator_excerpt_pr1318.txt: steps 13-17 only (5 lines), resumed after step 12
    run = analyze([shared_logs("real", module=False) / "primerl_orchestrator_excerpt_pr1318.txt"])["runs"][0]
    assert run["steps_in_file"] == 5 and run["resumed_from_step"] == 12 and run["steps"] == 17
