"""One definition per term (issue 56, item 2): the sentences that define the accounting's quantities and verdicts,
used word for word by every page that defines them (the report's Markdown and HTML, the plan's table and its figure
caption), so a reader meets one meaning per word. Sources: rN and "faster iff relative throughput > rN" (Li et al.
2026, "align, then accelerate"); rN for a batch without runs (McCandlish et al. 2018, eq. 2.11)."""

#: rN, the sample penalty
RN = "rN = samples-to-target / the reference's"
#: the relative time and when a batch is faster (the paper's rule)
RELATIVE_TIME = ("relative time = time-to-target / the reference's = rN / relative throughput; a batch is faster "
                 "iff its relative throughput exceeds its rN (Li et al. 2026)")
#: the verdicts of the decision (rlbatch.analysis.decision.decide)
VERDICTS = ("The verdict compares with the reference: \"faster\" or \"slower\" only when the simultaneous 95% "
            "interval of the relative time lies wholly below or above 1, else \"within noise\" (of the reference); "
            "\"undetermined\" when some seeds never reached the target and the lower bound does not show it slower, "
            "or when there is no seed-to-seed spread to judge one seed by.")
#: rN of a batch without runs, from the noise scale
RN_FROM_NOISE = "rN for batches without runs: E/E_min = 1 + B/B_noise (McCandlish et al. 2018, eq. 2.11)"
