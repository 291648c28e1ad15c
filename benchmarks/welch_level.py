"""The level of Welch's t on run means by itself (issue 39's unequal-variances cells): per design the run means of
two systems drawn directly, N(0, v_s) for n_s runs each (v_s = run variance + residual variance / items, the run
means' variance), and the rejection rate at alpha = 0.05 of Welch's t with Satterthwaite's df (scipy's
ttest_ind(equal_var=False)) and of Student's pooled t beside it.

    python benchmarks/welch_level.py [--sims 200000] > benchmarks/results/welch_level.txt

The Behrens-Fisher problem has no exact solution: with 3 runs of the noisier system Welch's df are estimated from
2 df and the test is somewhat liberal; this measures by how much, without any model fit.
"""

import argparse

import numpy as np
from scipy import stats

#: (v_1, n_1, v_2, n_2): run-mean variances and run counts; the first is issue 39's design (run SDs 0.02 and 0.06,
#: residual SDs 0.1 and 0.3, 100 items in the committed reference, 300 in the benchmark)
DESIGNS = [(0.02 ** 2 + 0.1 ** 2 / 300, 6, 0.06 ** 2 + 0.3 ** 2 / 300, 3),
           (0.02 ** 2 + 0.1 ** 2 / 300, 3, 0.06 ** 2 + 0.3 ** 2 / 300, 3),
           (0.06 ** 2 + 0.3 ** 2 / 300, 6, 0.02 ** 2 + 0.1 ** 2 / 300, 3),
           (1e-3, 3, 1e-3, 3), (1e-3, 6, 1e-3, 3), (0.02 ** 2, 10, 0.06 ** 2, 5)]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=200_000)
    ap.add_argument("--seed", type=int, default=39)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.sims} simulated pairs of run-mean sets per design; rejection rate at alpha = 0.05 (MC SE <= "
          f"{np.sqrt(0.25 / args.sims):.4f})")
    print("v_1, n_1, v_2, n_2 | Welch | pooled t")
    for v1, n1, v2, n2 in DESIGNS:
        a = rng.normal(0.0, np.sqrt(v1), (args.sims, n1))
        b = rng.normal(0.0, np.sqrt(v2), (args.sims, n2))
        welch = stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue
        pooled = stats.ttest_ind(a, b, axis=1, equal_var=True).pvalue
        print(f"{v1:.3g}, {n1}, {v2:.3g}, {n2} | {np.mean(welch <= 0.05):.4f} | {np.mean(pooled <= 0.05):.4f}")


if __name__ == "__main__":
    main()
