"""rlbatch: which RL batch size reaches your target score soonest on your hardware.

Implements "When Do Larger Batches Help Scale LLM Reinforcement Learning?" (Li et al., Tencent Hunyuan, 2026):
align (square-root learning-rate rule, curves on the retained-sample axis), then accelerate (raise the batch only
while the throughput gain beats the samples-to-target penalty rN).
"""

__version__ = "0.1.0"
