"""Regenerate the small sample logs of workbook 08 ("Your harness logs"), one folder per harness layout:

    python examples/harness_logs/make_samples.py            # all four
    python examples/harness_logs/make_samples.py helm       # one

- ``lm_eval/``  - lm-evaluation-harness output of 2 models x 3 seeds (one ``--output_path`` per seed) x 2 tasks;
- ``inspect/``  - Inspect logs of 2 models x 30 samples x 3 epochs, written by ``inspect_ai.eval`` with the
  ``mockllm`` provider (needs ``pip install 'vrs-workbooks[inspect]'``), slimmed of their event transcripts;
- ``helm/``     - HELM run folders of 2 models x 3 train trials;
- ``every_eval_ever/`` - Every Eval Ever instance-level JSON lines of 2 models x 2 epochs.

The scores are simulated 0/1 answers (:func:`vrs_helpers.evaluate.readers.writers.simulate_binary`: item
difficulty, system-by-item and run effects) with fixed seeds; the writers lay them out the way each harness does.
The Inspect logs carry run ids and timestamps, so regenerating them changes those bytes, not the scores.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from vrs_helpers.evaluate.readers.writers import (
    simulate_binary,
    write_every_eval_ever,
    write_helm,
    write_inspect,
    write_lm_eval,
)

HERE = Path(__file__).resolve().parent
SYSTEMS = ("acme/base-7b", "acme/tuned-7b")


def lm_eval(out: Path) -> None:
    table = simulate_binary(2901, systems=SYSTEMS, tasks=("arith", "logic_qa"), items=20, runs=3,
                            accuracy=(0.55, 0.65), run_sd=0.3)
    write_lm_eval(table, out)


def inspect(out: Path) -> None:
    table = simulate_binary(2902, systems=SYSTEMS, tasks=("yes_no",), items=30, repeats=3, accuracy=(0.55, 0.7),
                            clusters=6)
    write_inspect(table, out, cluster="cluster", slim=True)


def helm(out: Path) -> None:
    table = simulate_binary(2903, systems=SYSTEMS, tasks=("mmlu:subject=anatomy,method=multiple_choice_joint",),
                            items=30, runs=3, accuracy=(0.5, 0.6), run_sd=0.4)
    write_helm(table, out)


def every_eval_ever(out: Path) -> None:
    table = simulate_binary(2904, systems=SYSTEMS, tasks=("gsm8k",), items=20, repeats=2, accuracy=(0.4, 0.5))
    write_every_eval_ever(table, out)


MAKERS = {"lm_eval": lm_eval, "inspect": inspect, "helm": helm, "every_eval_ever": every_eval_ever}


def main(names) -> None:
    for name in names or MAKERS:
        out = HERE / name
        if out.exists():
            shutil.rmtree(out)
        MAKERS[name](out)
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        print(f"{name}: {sum(1 for p in out.rglob('*') if p.is_file())} files, {size / 1024:.0f} KiB in {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
