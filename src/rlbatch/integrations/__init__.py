"""rlbatch inside other trainers: :mod:`rlbatch.integrations.trl_callback` (a callback for TRL's ``GRPOTrainer`` that writes
a run-store directory) and :mod:`rlbatch.integrations.trl_train` (the TRL training entry point of
``rlbatch sweep --backend trl``)."""
