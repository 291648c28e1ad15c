"""Benchmark `vrs analyze` on an Inspect log folder of the issue-52 layout: 5 models x 2 runs (generation seeds 1
and 2), one task with one custom scorer (``starsim_scorer``, 0/1 values), --items samples, the logs written by
``inspect_ai.eval`` itself with the ``mockllm`` provider (a model's answer per sample drawn at its accuracy).

    python benchmarks/inspect_logs_speed.py [--items 300] [--repeat 3] [--keep DIR]

Prints the wall time (and the CPU time, which is the wall time on a quiet machine) of each `vrs analyze LOGDIR`
(no other option: the scorer is found as the task's metric; reading the 10 logs through inspect_ai, validation,
the runs-random test of the 5 models, the leaderboard with its pairwise tests, report.html, report.ipynb,
summary.json) and their median. Goal (issue 52): <= 10 s on a quiet machine.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ACCURACY = {"m-a": 0.85, "m-b": 0.83, "m-c": 0.6, "m-d": 0.55, "m-e": 0.4}


def write_logs(folder: Path, items: int, seed: int = 0) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import Score, accuracy, scorer, stderr
    from inspect_ai.solver import generate

    @scorer(metrics=[accuracy(), stderr()])
    def starsim_scorer():
        async def score(state, target):
            return Score(value=1 if state.output.completion == "yes" else 0)
        return score

    rng = np.random.default_rng(seed)
    samples = [Sample(id=str(i), input=f"q {i}?", target="yes") for i in range(items)]
    for run in (1, 2):
        for model, p in ACCURACY.items():
            said = rng.random(items) < p

            def outputs(messages, tools, tool_choice, config, said=said, model=model):
                item = int(messages[-1].text.split()[1].rstrip("?"))
                out = ModelOutput.from_content(model=model, content="yes" if said[item] else "no")
                out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
                return out

            eval(Task(dataset=samples, solver=generate(), scorer=starsim_scorer(), name="starsim_benchmark"),
                 model=get_model(f"mockllm/{model}", custom_outputs=outputs), log_dir=str(folder), display="none",
                 score_display=False, seed=run)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", default=None, help="write the logs here and keep them")
    args = ap.parse_args(argv)
    tmp = Path(args.keep or tempfile.mkdtemp())
    try:
        logs = tmp / "logs"
        if not logs.exists():
            t0 = time.time()
            write_logs(logs, args.items)
            print(f"wrote 10 Inspect logs of {args.items} samples in {time.time() - t0:.1f} s", file=sys.stderr)
        vrs = shutil.which("vrs") or str(Path(sys.executable).parent / "vrs")
        times, cpu = [], []
        for k in range(args.repeat):
            t0 = time.time()
            c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run([vrs, "analyze", str(logs), "--out", str(tmp / f"r{k}")], capture_output=True,
                                  text=True)
            times.append(time.time() - t0)
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                return done.returncode
        answer = (tmp / "r0" / "summary.txt").read_text().splitlines()[0]
        print(f"5 models x 2 runs x {args.items} items: vrs analyze {', '.join(f'{t:.1f}' for t in times)} s "
              f"(median {statistics.median(times):.1f} s wall; CPU {statistics.median(cpu):.1f} s: the wall time on a "
              "quiet machine)")
        print(answer)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
