"""Regenerate the small sample logs of workbook 08 ("Your harness logs"), one folder per harness layout:

    python examples/harness_logs/make_samples.py            # all four
    python examples/harness_logs/make_samples.py helm       # one

- ``lm_eval/``  - lm-evaluation-harness output of 2 models x 3 seeds (one ``--output_path`` per seed) x 2 tasks;
- ``inspect/``  - Inspect logs of 2 models x 30 samples x 3 epochs, written by ``inspect_ai.eval`` with the
  ``mockllm`` provider (needs ``pip install 'vrs-workbooks[inspect]'``), slimmed of their event transcripts;
- ``helm/``     - HELM run folders of 2 models x 3 train trials;
- ``every_eval_ever/`` - Every Eval Ever instance-level JSON lines of 2 models x 2 epochs.

The scores are simulated 0/1 answers with fixed seeds
(:func:`vrs_helpers.evaluate.logs.readers.writers.sample_tables`);
:func:`vrs_helpers.evaluate.logs.readers.writers.write_samples` lays them out the way each harness does. The Inspect
logs carry run ids and timestamps, so regenerating them changes those bytes, not the scores.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from vrs_helpers.evaluate.logs.readers.writers import sample_tables, write_samples

HERE = Path(__file__).resolve().parent


def main(names) -> None:
    for name in names or sample_tables():
        out = HERE / name
        if out.exists():
            shutil.rmtree(out)
        write_samples(HERE, [name])
        files = [p for p in out.rglob("*") if p.is_file()]
        print(f"{name}: {len(files)} files, {sum(p.stat().st_size for p in files) / 1024:.0f} KiB in {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
