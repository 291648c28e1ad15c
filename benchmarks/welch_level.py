"""The level of Welch's t on run means by itself (issue 39's unequal-variances cells): per design the run means of
two systems drawn directly, N(0, v_s) for n_s runs each (v_s = run variance + residual variance / items, the run
means' variance), and the rejection rate at alpha = 0.05 of Welch's t with Satterthwaite's df (scipy's
ttest_ind(equal_var=False)), of the same statistic on Hsu's (1938) conservative df min(n_1, n_2) - 1 (Scheffe 1970,
"Practical solutions of the Behrens-Fisher problem", JASA 65: 1501-1508), of the Behrens-Fisher test (the same
statistic against sqrt(w_1) T_1 + sqrt(w_2) T_2, T_s Student's t on n_s - 1 df, w_s the shares of the variance
estimate; vrs_helpers.book.run_means.behrens_fisher_p, here vectorised on the first --bf-sims draws) and of Student's
pooled t beside them.

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
    ap.add_argument("--bf-sims", type=int, default=20_000, help="draws the Behrens-Fisher test gets (20,000)")
    ap.add_argument("--seed", type=int, default=39)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{args.sims} simulated pairs of run-mean sets per design; rejection rate at alpha = 0.05 (MC SE <= "
          f"{np.sqrt(0.25 / args.sims):.4f})")
    print(f"v_1, n_1, v_2, n_2 | Welch | Hsu, df min(n) - 1 | pooled t | Behrens-Fisher (first {args.bf_sims})")
    q = (np.arange(1000) + 0.5) / 1000
    for v1, n1, v2, n2 in DESIGNS:
        a = rng.normal(0.0, np.sqrt(v1), (args.sims, n1))
        b = rng.normal(0.0, np.sqrt(v2), (args.sims, n2))
        res = stats.ttest_ind(a, b, axis=1, equal_var=False)
        welch = res.pvalue
        hsu = 2 * stats.t.sf(np.abs(res.statistic), min(n1, n2) - 1)
        pooled = stats.ttest_ind(a, b, axis=1, equal_var=True).pvalue
        a, b = a[:args.bf_sims], b[:args.bf_sims]
        s1, s2 = a.var(axis=1, ddof=1) / n1, b.var(axis=1, ddof=1) / n2
        t = np.abs(a.mean(axis=1) - b.mean(axis=1)) / np.sqrt(s1 + s2)
        w1 = (s1 / (s1 + s2))[:, None]  # closed form in T_1, midpoint rule on 1,000 quantiles of T_2
        shift = np.sqrt(1 - w1) * stats.t.ppf(q, n2 - 1)[None, :]
        bf = (stats.t.sf((t[:, None] - shift) / np.sqrt(w1), n1 - 1)
              + stats.t.cdf((-t[:, None] - shift) / np.sqrt(w1), n1 - 1)).mean(axis=1)
        print(f"{v1:.3g}, {n1}, {v2:.3g}, {n2} | {np.mean(welch <= 0.05):.4f} | {np.mean(hsu <= 0.05):.4f} | "
              f"{np.mean(pooled <= 0.05):.4f} | {np.mean(bf <= 0.05):.4f}")


if __name__ == "__main__":
    main()
