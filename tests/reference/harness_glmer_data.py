"""The long table of the Inspect-logs acceptance case of issue 29 for the glmer reference (harness_glmer.R).

Command: PYTHONPATH=. .venv/bin/python tests/reference/harness_glmer_data.py   (writes harness_glmer.csv.gz)

Two models x 240 samples x 3 epochs of 0/1 scores, from vrs_helpers.evaluate.logs.readers.writers.simulate_binary (seed
29240; logit scale: accuracies 0.62 and 0.70, item SD 1.0, model-by-item SD 0.5). The epochs are repeats of an
item: the GLMM `correct ~ model + (1|id) + (1|model:id)` does not use their labels, so the reference holds for any
Inspect log written from this table (vrs_helpers.evaluate.logs.readers.writers.write_inspect), whatever epoch Inspect
gives each answer.
"""

from pathlib import Path

from vrs_helpers.evaluate.logs.readers.writers import simulate_binary

SEED = 29240


def table():
    t = simulate_binary(SEED, systems=("model-a", "model-b"), tasks=("qa",), items=240, repeats=3,
                        accuracy=(0.62, 0.70))
    return t.rename(columns={"system": "model", "item": "id", "repeat": "epoch", "score": "correct"})[
        ["model", "id", "epoch", "correct"]]


if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "harness_glmer.csv.gz"
    table().to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
    print(out)
