"""Benchmark the paired resampling tests and ASO of vrs_helpers.book.significance against sacrebleu and
deep-significance.

    python benchmarks/significance.py [--items 100000] [--resamples 10000]

Prints one table: task, items, resamples, our seconds, the peer's seconds on the same inputs and settings, the
ratio, and both p-values. Peers that are not installed are reported as skipped. p-values: ours count c/R as the
book's Algorithms 4.1/4.2 do; sacrebleu reports (c+1)/(R+1); deepsig's bootstrap_test is a one-sided test of its
own construction, so its p-value is not comparable. Times are the best of 3 runs (1 if a run takes
> 5 s). Our corpus-level F1 test runs at the full size; the peers run at
the size given by --peer-items and --peer-resamples, with ours timed again at that size for the ratio.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vrs_helpers.book import significance as sg  # noqa: E402
from vrs_helpers.book.stochastic_order import aso  # noqa: E402


def timed(fn, repeat: int = 3):
    """Best wall time of ``repeat`` runs (one run if it takes more than 5 s), the same rule for us and the peers."""
    best, out = float("inf"), None
    for i in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
        if i == 0 and best > 5:
            break
    return best, out


def f1_stats(n, seed):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    pa = np.where(rng.random(n) < 0.85, y, ~y)
    pb = np.where(rng.random(n) < 0.84, y, ~y)

    def suff(p):
        return np.column_stack([p & y, p & ~y, ~p & y]).astype(float)

    return suff(pa), suff(pb)


def synthetic_corpus(n, seed):
    """Random 'translations': references and two systems that copy 70% / 68% of the reference tokens."""
    rnd = random.Random(seed)
    vocab = [f"w{i}" for i in range(2000)]
    refs, sys_a, sys_b = [], [], []
    for _ in range(n):
        ref = [rnd.choice(vocab) for _ in range(rnd.randint(5, 30))]
        refs.append(" ".join(ref))
        sys_a.append(" ".join(t if rnd.random() < 0.70 else rnd.choice(vocab) for t in ref))
        sys_b.append(" ".join(t if rnd.random() < 0.698 else rnd.choice(vocab) for t in ref))
    return refs, sys_a, sys_b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=100_000)
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--peer-items", type=int, default=5_000)
    ap.add_argument("--peer-resamples", type=int, default=1_000)
    args = ap.parse_args(argv)
    rows = []

    a, b = f1_stats(args.items, 0)
    for name, fn in (("permutation", sg.permutation_test), ("bootstrap", sg.bootstrap_test)):
        t, r = timed(lambda fn=fn: fn(a, b, "f1", n_resamples=args.resamples, seed=1))
        rows.append({"task": f"corpus F1, paired {name}", "items": args.items, "resamples": args.resamples,
                     "ours s": f"{t:.3f}", "peer": "(target <= 2 s)", "peer s": "", "peer/ours": "",
                     "p ours": f"{r.p_value:.4f}", "p peer": ""})

    # deep-significance: paired permutation / bootstrap tests of sentence-level scores (mean difference)
    try:
        import deepsig
    except ImportError:
        deepsig = None
    rng = np.random.default_rng(2)
    sa = rng.normal(0.50, 0.2, args.peer_items)
    sb = sa + rng.normal(0.0012, 0.05, args.peer_items)  # a small effect: p-values away from 0
    for name, ours_fn, peer_name in (("permutation", sg.permutation_test, "permutation_test"),
                                     ("bootstrap", sg.bootstrap_test, "bootstrap_test")):
        t_ours, r_ours = timed(lambda f=ours_fn: f(sb, sa, n_resamples=args.peer_resamples, seed=3))
        if deepsig is None:
            peer_t, peer_p, note = None, None, "deepsig not installed"
        else:
            peer_t, peer_p = timed(lambda n=peer_name: getattr(deepsig, n)(sb, sa, num_samples=args.peer_resamples,
                                                                             seed=3))
            note = f"deepsig.{peer_name}"
        rows.append({"task": f"sentence-level mean, paired {name}", "items": args.peer_items,
                     "resamples": args.peer_resamples, "ours s": f"{t_ours:.3f}", "peer": note,
                     "peer s": "" if peer_t is None else f"{peer_t:.3f}",
                     "peer/ours": "" if peer_t is None else f"{peer_t / t_ours:.0f}x",
                     "p ours": f"{r_ours.p_value:.4f}", "p peer": "" if peer_p is None else f"{peer_p:.4f}"})

    # deepsig: Almost Stochastic Order on per-run means (5 and 3 runs per system, 1,000 bootstrap iterations), on
    # the reference inputs of tests/reference/aso_deepsig.json in the direction where eps_min is below 1
    ref = json.loads((Path(__file__).resolve().parent.parent / "tests" / "reference" / "aso_deepsig.json")
                     .read_text())["pairs"]
    for name in ("five_runs", "three_runs"):
        ra, rb = np.asarray(ref[name]["b"]), np.asarray(ref[name]["a"])
        runs = len(ra)
        t_ours, r_ours = timed(lambda a=ra, b=rb: aso(a, b, seed=7))
        if deepsig is None:
            peer_t, peer_eps, note = None, None, "deepsig not installed"
        else:
            peer_t, peer_eps = timed(lambda a=ra, b=rb: deepsig.aso(a, b, seed=7, show_progress=False), repeat=1)
            note = "deepsig.aso"
        rows.append({"task": f"ASO eps_min, {runs} vs {runs} runs", "items": runs, "resamples": 1000,
                     "ours s": f"{t_ours:.4f}", "peer": note, "peer s": "" if peer_t is None else f"{peer_t:.3f}",
                     "peer/ours": "" if peer_t is None else f"{peer_t / t_ours:.0f}x",
                     "p ours": f"eps {r_ours.eps_min:.3f}",
                     "p peer": "" if peer_eps is None else f"eps {peer_eps:.3f}"})

    # sacrebleu: paired approximate randomization / bootstrap of corpus BLEU on the same segment statistics
    try:
        from sacrebleu.metrics import BLEU
        from sacrebleu.significance import PairedTest
    except ImportError:
        BLEU = None
    if BLEU is not None:
        refs, hyp_a, hyp_b = synthetic_corpus(args.peer_items, 4)
        bleu = BLEU()
        stats_a = np.array(bleu._extract_corpus_statistics(hyp_a, [refs]), dtype=float)
        stats_b = np.array(bleu._extract_corpus_statistics(hyp_b, [refs]), dtype=float)
        # sacrebleu's layout: hyp_len, ref_len, correct_1..4, total_1..4 -> ours: correct, total, hyp_len, ref_len
        order = [2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
        ours_a, ours_b = stats_a[:, order], stats_b[:, order]
        check = 100 * sg.bleu_like_metric(ours_a.sum(0), len(refs))
        assert abs(check - bleu.corpus_score(hyp_a, [refs]).score) < 1e-6, "BLEU statistics disagree"
        for name, test_type, ours_fn in (("approximate randomization", "ar", sg.permutation_test),
                                         ("bootstrap", "bs", sg.bootstrap_test)):
            t_ours, r_ours = timed(lambda f=ours_fn: f(ours_b, ours_a, "bleu", n_resamples=args.peer_resamples,
                                                       seed=5))
            pt = PairedTest([("baseline", hyp_a), ("system", hyp_b)], {"BLEU": BLEU()}, [refs], test_type=test_type,
                            n_samples=args.peer_resamples)
            peer_t, res = timed(pt)
            p_peer = res[1]["BLEU"][1].p_value
            rows.append({"task": f"corpus BLEU, paired {name}", "items": args.peer_items,
                         "resamples": args.peer_resamples, "ours s": f"{t_ours:.3f}",
                         "peer": "sacrebleu PairedTest (incl. its statistics extraction)",
                         "peer s": f"{peer_t:.3f}", "peer/ours": f"{peer_t / t_ours:.0f}x",
                         "p ours": f"{r_ours.p_value:.4f}", "p peer": f"{p_peer:.4f}"})
    else:
        rows.append({"task": "corpus BLEU", "peer": "sacrebleu not installed"})
    print(pd.DataFrame(rows).fillna("").to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
