"""The general extraction layer under the format readers: records from any line-oriented text (issue 24).

A log of an unseen format degrades gracefully instead of falling through: :func:`scan` finds *records* in any text,
:func:`organize` turns records into training rows, evaluation rows and a run-level config for
:func:`rlbatch.readers.common.build_run`, and :func:`find_config` reads P, G, the update batch and the learning rate
from wherever the file states them. The format readers (verl, TRL, JSONL, ...) use the same pieces.

Records (one :class:`Record` each) from:

- JSON objects, one per line: flat, nested (names joined with ``/``), or verl's ``{"step": N, "data": {...}}``;
- Python dict reprs (``{'loss': 0.1, ...}``), also glued to a progress bar, behind a label (``step 3: {...}``,
  ``model.py:660 - step 1: {...}``) or wrapped over several lines; parsed with :func:`ast.literal_eval` only;
- ``step:N - name:value - ...`` (verl), ``Step N | a: x | b: y`` tables, ``key=value`` runs and ``key: value`` /
  ``key value`` runs after a label (``Iter 3: Train loss 0.1, Learning Rate 1e-05, It/sec 0.05``);
- Markdown tables (a heading such as ``Rollout Step 3`` or ``Evaluation Step 10`` labels the table that follows;
  a two-column ``| Metric | Value |`` table is one record, a table with a step column one record per row) and HTML
  tables (Jupyter ``text/html`` outputs: ``Step | Training Loss | reward ...``).

Containers: Jupyter notebooks (:func:`notebook_text`: stream and ``text/plain`` outputs as lines, HTML tables as
records, code cells kept for their config), Markdown with fenced blocks, W&B's ``output.log``, ANSI colour codes and
carriage-return progress bars (:func:`clean`).

Kinds: a ``type``/``kind``/``split``/``mode``/``phase`` field (``train``, ``rollout``, ``eval``, ``config``,
``summary``...), the label in front of a record (``[eval]``, ``Val``, ``validation step=5``), the heading of a
table, or the keys themselves (every name validation-prefixed).

Counters: several step counters in one file (rollout step, optimizer step, global step, epoch) are told apart by
name (:data:`OPTIMIZER_COUNTERS`, :data:`ROLLOUT_COUNTERS`); the optimizer-update counter is the run's ``step``
where present, the rollout counter is kept (``raw/<name>``), and the choice is stated in the run's notes.

Evaluation names: besides the canonical table, a name logged in records without any training metric (a baseline
evaluation before training, an eval-only record) is an evaluation quantity; the score is the first such name meaning
accuracy, pass rate or score (:func:`eval_score_name`), never a loss.

Nothing is ever ``eval``'ed or unpickled: JSON through :mod:`json`, dicts through :func:`ast.literal_eval`.

The pipeline, in the order a reader runs it, one module per stage (this module re-exports each stage's entry
points, so a reader imports ``extract`` and reads top to bottom):

1. :mod:`rlbatch.readers.linescan` — line scanning: :func:`clean`, notebooks and HTML tables, :func:`scan` (text ->
   :class:`Record` list), :func:`json_record`;
2. :mod:`rlbatch.readers.records` — record organisation: counters, the score's name, :func:`organize` (records ->
   training rows, evaluation rows, config), P and G from per-step counts;
3. :mod:`rlbatch.readers.discover` — configuration discovery: :func:`find_config`, :func:`config_from_mapping`,
   :func:`launch_config` (-> :class:`ConfigFound`);
4. :mod:`rlbatch.readers.runsplit` — runs in one file and how they ended: :func:`split_records`,
   :func:`split_runs`, :func:`json_document_records`, :func:`final_eval`, :func:`stop_reason`.

Adding a format: ``docs/adding-a-reader.md``.
"""

from __future__ import annotations

from rlbatch.readers.discover import (ConfigFound, config_from_mapping, config_key, find_config, launch_config,
                                      launch_config_from_spec)
from rlbatch.readers.linescan import Notebook, Record, clean, html_tables, is_notebook, json_record, notebook_text, \
    parse_pydict, scan
from rlbatch.readers.records import Organized, batch_from_steps, counters_in, eval_score_name, organize
from rlbatch.readers.runsplit import (RUN_FIELDS, FinalEval, RunPart, final_eval, json_document_records,
                                      run_starts, split_records, split_runs, stop_reason, summary_export)

__all__ = ["ConfigFound", "FinalEval", "Notebook", "Organized", "RUN_FIELDS", "Record", "RunPart", "batch_from_steps",
           "clean", "config_from_mapping", "config_key", "counters_in", "eval_score_name", "final_eval", "find_config",
           "html_tables", "is_notebook", "json_document_records", "json_record", "launch_config",
           "launch_config_from_spec", "notebook_text", "organize", "parse_pydict", "run_starts", "scan",
           "split_records", "split_runs", "stop_reason", "summary_export"]
