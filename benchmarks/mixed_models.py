"""Benchmark vrs_helpers.mixed against its peers on the book's data and simulated large designs.

    python benchmarks/mixed_models.py [--repeats 3] [--statsmodels-timeout 60] [--stream-rows 10000000] [--with-load]
    python benchmarks/mixed_models.py --cold [--only InstEval]

Prints one table: problem, rows, wall seconds of ours (default: one BLAS thread when the dense blocks are small)
and of ours with the BLAS library's default threads, mixedlm, statsmodels and lme4, the ratios (peer time / our
time) and the difference of our REML log-likelihood from lme4's. Every peer runs in the same run on the same data.
lme4 runs only when `Rscript` with lme4 is on PATH; statsmodels runs in a subprocess with a time limit and a
memory cap, and the table says when it did not finish. Our peak memory beyond the loaded data is measured with
tracemalloc; the streamed fit's peak RSS in a fresh subprocess. Timings are the best of --repeats runs for ours and
mixedlm (both warmed up), one run for the others. --with-load keeps one core busy with another process meanwhile.

Problems: book Table 3.11's model, Table 4.3's, a simulated design with two large crossed factors (73k rows),
a 4,050-row items x raters x occasions G-study, a random-slope design (50k rows) and the 10^6-row simulation.
Data: VRS_DATA_DIR for the book's data (as for the tests); the simulated 10^6-row design is read from
../shared/reference/sim/ (lme4's fits of it are in ../shared/reference/results/exp7_*.json).

--cold times what a user sees: each tool in a fresh process (interpreter or R start excluded), its import
(``from vrs_helpers import mixed``, ``import mixedlm``, ``library(lme4)``) reported apart, then the first fit (cold)
and, in the same process, the best of --repeats further fits (warm), lme4 with its default control as a user calls
``lmer()``. Problems: the real designs whose data are public - lme4's InstEval (73,421 ratings, 2,972 students x
1,128 lecturers; read through Rscript when R with lme4 is installed, else a simulated stand-in of the same shape,
which the table says), book Table 3.11 (the registry's data), afex's fhch2010 and mlmRev's Chem97 (or its
stand-in). The last column compares the REML criteria (-2 REML log-likelihood) of ours and of lme4 run to
convergence (bobyqa, rhoend 1e-12), not lme4's default stop.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
sys.path.insert(0, str(ROOT))

from vrs_helpers import mixed  # noqa: E402

T311 = ("ter ~ (1|sentence_id) + (1|learning_rate) + (1|seed) + (1|encoder_dropout) + (1|decoder_dropout)"
        " + (1|decoder_dropout_hidden)")
SIM = "y ~ 1 + (1|s) + (1|a) + (1|b) + (1|c) + (1|d) + (1|e)"


TWO_LARGE = "y ~ 1 + (1|item) + (1|rater) + (1|cond)"
IRO = "y ~ 1 + (1|item) + (1|rater) + (1|item:rater)"
SLOPES = "y ~ x + (1 + x|subject) + (1|item)"
FACTOR_SLOPES = "log_rt ~ task*stimulus + (stimulus|id) + (task|item)"
CODED_SLOPES = "log_rt ~ task01*stimulus01 + (stimulus01|id) + (task01|item)"
CHEM97 = "score ~ gcsecnt + (gcsecnt|school) + (1|lea)"
REFERENCE = ROOT / "tests" / "reference"


def fhch2010():
    """afex's fhch2010 lexical-decision data (13,222 trials, 45 participants x 600 words; tests/reference), with the
    factors task and stimulus also coded 0/1 by hand (issue 21's table)."""
    d = pd.read_csv(REFERENCE / "fhch2010.csv.gz")
    d["task01"] = (d["task"] == "lexdec").astype(float)
    d["stimulus01"] = (d["stimulus"] == "nonword").astype(float)
    return d


def chem97(seed=14):
    """mlmRev's Chem97 (31,022 pupils in 2,410 schools in 131 areas) written out by R when mlmRev is installed;
    otherwise simulated data of the same shape (the table's row says which)."""
    rscript = shutil.which("Rscript")
    if rscript:
        tmp = Path(tempfile.mkdtemp())
        res = subprocess.run([rscript, "-e", f'data(Chem97, package = "mlmRev"); '
                              f'write.csv(Chem97, "{tmp / "c.csv"}", row.names = FALSE)'],
                             capture_output=True, text=True)
        if res.returncode == 0:
            d = pd.read_csv(tmp / "c.csv", dtype={"lea": str, "school": str})
            shutil.rmtree(tmp, ignore_errors=True)
            return d[["score", "gcsecnt", "school", "lea"]], "mlmRev"
        shutil.rmtree(tmp, ignore_errors=True)
    rng = np.random.default_rng(seed)
    lea_of_school = rng.integers(0, 131, 2410)
    school = np.sort(rng.integers(0, 2410, 31_022))
    x = rng.normal(0, 1.1, len(school))
    b = rng.normal(size=(2410, 2)) @ np.linalg.cholesky(np.array([[1.4, -0.1], [-0.1, 0.05]])).T
    y = 5.8 + 2.4 * x + b[school, 0] + b[school, 1] * x + rng.normal(0, 0.5, 131)[lea_of_school[school]] \
        + rng.normal(0, 2.2, len(school))
    return pd.DataFrame({"score": y, "gcsecnt": x, "school": [f"s{i}" for i in school],
                         "lea": [f"l{i}" for i in lea_of_school[school]]}), "simulated, Chem97's shape"


def two_large_factors(seed=11, n_rows=73_000, n_item=3000, n_rater=1100, n_cond=14):
    """Crossed design of the shape of issue 10: ~3,000 items x ~1,100 raters (+ a 14-level factor), 73k rows."""
    rng = np.random.default_rng(seed)
    item, rater, cond = (rng.integers(0, k, n_rows) for k in (n_item, n_rater, n_cond))
    y = (rng.normal(0, 0.5, n_item)[item] + rng.normal(0, 0.3, n_rater)[rater] + rng.normal(0, 0.1, n_cond)[cond]
         + rng.normal(0, 1, n_rows))
    return pd.DataFrame({"item": [f"i{i}" for i in item], "rater": [f"r{i}" for i in rater],
                         "cond": [f"c{i}" for i in cond], "y": y})


def items_raters_occasions(seed=12, n_item=90, n_rater=15, n_occ=3):
    """90 items x 15 raters x 3 occasions = 4,050 rows: item, rater and item:rater variance (a G-study)."""
    rng = np.random.default_rng(seed)
    g = pd.MultiIndex.from_product([range(n_item), range(n_rater), range(n_occ)]).to_frame(index=False)
    g.columns = ["item", "rater", "occ"]
    ir = rng.normal(0, 0.4, (n_item, n_rater))
    y = (rng.normal(0, 1, n_item)[g.item] + rng.normal(0, 0.3, n_rater)[g.rater] + ir[g.item, g.rater]
         + rng.normal(0, 0.5, len(g)))
    return pd.DataFrame({"item": "i" + g.item.astype(str), "rater": "r" + g.rater.astype(str), "y": y})


def slopes_design(seed=13, n_rows=50_000, n_subject=1000, n_item=200):
    """Correlated random intercept and slope per subject plus an item intercept, 50k rows."""
    rng = np.random.default_rng(seed)
    subj, item = rng.integers(0, n_subject, n_rows), rng.integers(0, n_item, n_rows)
    x = rng.uniform(0, 9, n_rows)
    L = np.linalg.cholesky(np.array([[1.0, 0.1], [0.1, 0.05]]))
    b = rng.normal(size=(n_subject, 2)) @ L.T
    y = 2 + 0.5 * x + b[subj, 0] + b[subj, 1] * x + rng.normal(0, 0.3, n_item)[item] + rng.normal(0, 1, n_rows)
    return pd.DataFrame({"subject": [f"s{i}" for i in subj], "item": [f"i{i}" for i in item], "x": x, "y": y})


INSTEVAL = "y ~ 1 + (1|s) + (1|d)"
INSTEVAL_FIXED = "y ~ service * dept + (1|s) + (1|d)"


def insteval(seed=15):
    """lme4's InstEval (73,421 ratings y of lecturers d by students s; service and dept as in lme4), written out by R
    when lme4 is installed (its lazy-load data base is not a file rdata reads); otherwise a simulated stand-in with
    the same numbers of rows and levels. The second value says which. Nothing is stored."""
    rscript = shutil.which("Rscript")
    if rscript:
        tmp = Path(tempfile.mkdtemp())
        res = subprocess.run([rscript, "-e", f'data(InstEval, package = "lme4"); '
                              f'write.csv(InstEval, "{tmp / "i.csv"}", row.names = FALSE)'],
                             capture_output=True, text=True)
        if res.returncode == 0:
            d = pd.read_csv(tmp / "i.csv", dtype={c: str for c in ("s", "d", "studage", "lectage", "service", "dept")})
            shutil.rmtree(tmp, ignore_errors=True)
            return d[["y", "s", "d", "service", "dept"]], "lme4's InstEval"
        shutil.rmtree(tmp, ignore_errors=True)
    rng = np.random.default_rng(seed)
    n = 73_421
    s, d = rng.integers(0, 2972, n), rng.integers(0, 1128, n)
    dept = rng.integers(0, 14, 1128)[d]
    service = rng.integers(0, 2, n)
    y = np.clip(np.rint(3.2 + rng.normal(0, 0.57, 2972)[s] + rng.normal(0, 0.51, 1128)[d] + 0.1 * service
                        + rng.normal(0, 1.18, n)), 1, 5)
    return pd.DataFrame({"y": y, "s": [f"s{i}" for i in s], "d": [f"d{i}" for i in d],
                         "service": service.astype(str), "dept": [f"p{i}" for i in dept]}), \
        "simulated stand-in, InstEval's shape"


def cold_problems():
    """The real designs with public data for --cold (stand-ins where the data are not available, named)."""
    from vrs_helpers.book import data

    if not os.environ.get("VRS_DATA_DIR") and (SHARED / "data" / "SHA256SUMS").is_file():
        os.environ["VRS_DATA_DIR"] = str(SHARED / "data")
    ie, source = insteval()
    out = [(f"InstEval {INSTEVAL} ({source})", INSTEVAL, ie),
           (f"InstEval {INSTEVAL_FIXED} ({source})", INSTEVAL_FIXED, ie)]
    full = data.load("mt_grid_full")
    full = full[full["delta_scheme"] == "(-0.5:0.5)"].reset_index(drop=True)
    out.append(("Table 3.11 model (registry data)", T311, full))
    out.append(("fhch2010 factor slopes (afex data)", FACTOR_SLOPES, fhch2010()))
    chem, chem_source = chem97()
    out.append((f"Chem97 (gcsecnt|school) + (1|lea) ({chem_source})", CHEM97, chem))
    return out


def problems():
    from vrs_helpers.book import data

    if not os.environ.get("VRS_DATA_DIR") and (SHARED / "data" / "SHA256SUMS").is_file():
        os.environ["VRS_DATA_DIR"] = str(SHARED / "data")
    out = []
    full = data.load("mt_grid_full")
    full = full[full["delta_scheme"] == "(-0.5:0.5)"].reset_index(drop=True)
    out.append(("Table 3.11 model (REML)", T311, full))
    ter = data.load("mt_ter")
    x = ter["src_length"].astype(float)
    ter["src_length_class"] = pd.Categorical(np.select([x <= 15, x <= 55], ["short", "typical"], "very long"))
    out.append(("Table 4.3 model (REML)", "ter ~ system * src_length_class + (1|sentence_id)", ter))
    out.append(("two large crossed factors, 73k rows (REML)", TWO_LARGE, two_large_factors()))
    out.append(("items x raters x occasions, 4,050 rows (REML)", IRO, items_raters_occasions()))
    out.append(("random slopes (1 + x|subject) + (1|item), 50k rows (REML)", SLOPES, slopes_design()))
    fh = fhch2010()
    out.append(("fhch2010 factor slopes (stimulus|id) + (task|item) (REML)", FACTOR_SLOPES, fh))
    out.append(("fhch2010, factors coded 0/1 by hand (REML)", CODED_SLOPES, fh))
    chem, source = chem97()
    out.append((f"Chem97 (gcsecnt|school) + (1|lea) ({source}, REML)", CHEM97, chem))
    sim_file = SHARED / "reference" / "sim" / "sim_N1e6.csv.gz"
    if sim_file.is_file():
        sim = pd.read_csv(sim_file)
        for c in "sabcde":
            sim[c] = sim[c].astype("category")
        out.append(("sim 10^6, 5 crossed factors (REML)", SIM, sim))
        rng = np.random.default_rng(2026)
        out.append(("sim 10^6 minus 20% rows (REML)", SIM, sim[rng.random(len(sim)) >= 0.2].reset_index(drop=True)))
    return out


def best_of(fn, repeats):
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def time_ours(formula, df, repeats, threads="auto"):
    """Best-of wall time, peak traced memory and logLik of our REML fit (threads: see mixed.fit's blas_threads)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        seconds = best_of(lambda: mixed.fit(formula, df, blas_threads=threads), repeats)
        tracemalloc.start()
        m = mixed.fit(formula, df, blas_threads=threads)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return seconds, peak / 2**20, m.loglik


def time_mixedlm(formula, df, repeats):
    try:
        import mixedlm
    except ImportError:
        return None, "not installed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return best_of(lambda: mixedlm.lmer(formula, df, REML=True), repeats), ""


def _random_terms(formula):
    return [t.strip()[3:-1].strip() for t in formula.split("~")[1].split("+") if t.strip().startswith("(1|")]


def time_statsmodels(formula, df, timeout, mem_gb):
    """statsmodels MixedLM with crossed effects as variance components in one group, in a capped subprocess."""
    groups = _random_terms(formula)
    fixed = formula.split("~")[1].split("+ (1|")[0].split("(1|")[0].strip(" +") or "1"
    response = formula.split("~")[0].strip()
    tmp = Path(tempfile.mkdtemp())
    df[[response] + [v for v in dict.fromkeys(sum((g.split(":") for g in groups), []) + [
        c for c in df.columns if c in fixed])]].to_parquet(tmp / "d.parquet")
    script = textwrap.dedent(f"""
        import resource, time, warnings, pandas as pd, statsmodels.formula.api as smf
        resource.setrlimit(resource.RLIMIT_AS, ({int(mem_gb * 2**30)}, {int(mem_gb * 2**30)}))
        warnings.simplefilter("ignore")
        d = pd.read_parquet("{tmp / 'd.parquet'}")
        groups = {groups!r}
        t = time.perf_counter()
        if len(groups) == 1:  # one grouping factor: statsmodels' native random intercept
            m = smf.mixedlm("{response} ~ {fixed}", d, groups=groups[0]).fit(reml=True)
        else:  # crossed factors: variance components within a single all-encompassing group
            d["one"] = 1
            vc = {{g: "0 + C(" + g + ")" for g in groups}}
            m = smf.mixedlm("{response} ~ {fixed}", d, groups="one", vc_formula=vc, re_formula="0").fit(reml=True)
        print(time.perf_counter() - t)
    """)
    try:
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"did not finish in {timeout} s"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if res.returncode != 0:
        last = (res.stderr.strip().splitlines() or ["?"])[-1]
        if "MemoryError" in res.stderr or "Unable to allocate" in res.stderr:
            return None, f"failed: out of memory (capped at {mem_gb:g} GB)"
        return None, f"failed: {last[:60]}"
    return float(res.stdout.strip().splitlines()[-1]), ""


def recorded_lme4(rows: int):
    """lme4's wall time recorded in ../shared/reference for the simulated design of this size (REML)."""
    for f in sorted((SHARED / "reference" / "results").glob("exp7_sim_N1e*_REML_default.json")):
        rec = json.loads(f.read_text())
        if rec.get("n_rows") == rows and rec.get("wall_time_s"):
            return float(rec["wall_time_s"])
    return None


def time_lme4(formula, df, max_rows):
    if len(df) > max_rows:
        rec = recorded_lme4(len(df))
        note = f"recorded {rec:.0f}" if rec else "skipped"
        return None, f"{note} (> {max_rows:,} rows)"
    rscript = shutil.which("Rscript")
    if not rscript:
        return None, "skipped: no Rscript"
    check = subprocess.run([rscript, "-e", "library(lme4)"], capture_output=True, text=True)
    if check.returncode != 0:
        return None, "skipped: lme4 not installed"
    tmp = Path(tempfile.mkdtemp())
    df.to_csv(tmp / "d.csv", index=False)
    factors = _r_factors(formula, df)
    script = textwrap.dedent(f"""
        suppressPackageStartupMessages(library(lme4))
        d <- read.csv("{tmp / 'd.csv'}")
        for (f in c({", ".join(repr(str(c)) for c in factors)})) d[[f]] <- factor(d[[f]])
        ctrl <- lmerControl(optimizer = "nloptwrap", calc.derivs = FALSE)
        invisible(lmer({formula}, data = d[seq_len(min(nrow(d), 20000)), ], REML = TRUE, control = ctrl))  # warm-up
        t <- system.time(m <- lmer({formula}, data = d, REML = TRUE, control = ctrl))["elapsed"]
        cat(t, sprintf("%.10f", as.numeric(logLik(m))), "\\n")
    """)
    (tmp / "b.R").write_text(script)
    try:
        res = subprocess.run([rscript, str(tmp / "b.R")], capture_output=True, text=True, timeout=1800)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if res.returncode != 0:
        return None, "failed: " + (res.stderr.strip().splitlines() or ["?"])[-1][:60]
    el, ll = res.stdout.split()[-2:]
    return float(el), float(ll)


def _r_factors(formula, df):
    """The columns R must turn into factors: the non-float ones, except the response and the random slopes' variables
    (a response or slope read as integers stays numeric)."""
    factors = [c for c in df.columns if not pd.api.types.is_float_dtype(df[c])]
    slopes = [v for t in formula.split("(")[1:] for v in t.split("|")[0].replace("+", " ").split()
              if v not in ("0", "1")]
    response = formula.split("~")[0].strip()
    return [c for c in factors if c not in slopes and c != response]


COLD_PY = """
import json, sys, time, warnings
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
{imports}
imported = time.perf_counter() - t0
import pandas as pd
d = pd.read_parquet({data!r})
warnings.simplefilter("ignore")
def once():
    t = time.perf_counter()
    m = {call}
    return time.perf_counter() - t, m
cold, m = once()
warm = min(once()[0] for _ in range({repeats}))
print(json.dumps({{"import": imported, "cold": cold, "warm": warm, "crit": float({crit})}}))
"""

COLD_TOOLS = {  # imports, call, REML criterion (-2 REML log-likelihood) of the fit m
    "ours": ("from vrs_helpers import mixed", "mixed.fit({formula!r}, d)", "-2 * m.loglik"),
    "mixedlm": ("import mixedlm", "mixedlm.lmer({formula!r}, d, REML=True)", "m.REMLcrit()"),
}

COLD_R = """
t0 <- proc.time()[["elapsed"]]
suppressPackageStartupMessages(library(lme4))
imported <- proc.time()[["elapsed"]] - t0
d <- read.csv("{data}")
for (f in c({factors})) d[[f]] <- factor(d[[f]])
cold <- system.time(m <- lmer({formula}, data = d, REML = TRUE))[["elapsed"]]
n_warm <- if (cold > {slow}) 1 else {repeats}
warm <- min(sapply(seq_len(n_warm), function(i) system.time(lmer({formula}, data = d, REML = TRUE))[["elapsed"]]))
tight <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
converged <- if ({converged}) REMLcrit(lmer({formula}, data = d, REML = TRUE, control = tight)) else NA
cat(imported, cold, warm, sprintf("%.10f", REMLcrit(m)), sprintf("%.10f", converged), n_warm, "\\n")
"""


def cold_python(tool, formula, df, repeats, timeout=1800):
    """{import, cold, warm, crit} of ``tool`` ("ours" or "mixedlm") in a fresh Python process, or a note."""
    if tool == "mixedlm":
        try:
            import mixedlm  # noqa: F401
        except ImportError:
            return "not installed"
    imports, call, crit = COLD_TOOLS[tool]
    tmp = Path(tempfile.mkdtemp())
    try:
        df.to_parquet(tmp / "d.parquet")
        script = COLD_PY.format(root=str(ROOT), imports=imports, data=str(tmp / "d.parquet"), repeats=repeats,
                                call=call.format(formula=formula), crit=crit)
        res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout} s"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if res.returncode != 0:
        return "failed: " + (res.stderr.strip().splitlines() or ["?"])[-1][:60]
    return json.loads(res.stdout.strip().splitlines()[-1])


def cold_lme4(formula, df, repeats, converged=True, slow=20.0):
    """lme4 in a fresh R process: library(lme4), the first lmer() (default control), the best of ``repeats`` more
    (one when the first took over ``slow`` seconds) and, with ``converged``, the REML criterion of a fit run to
    convergence; or a note."""
    rscript = shutil.which("Rscript")
    if not rscript:
        return "skipped: no Rscript"
    tmp = Path(tempfile.mkdtemp())
    try:
        df.to_csv(tmp / "d.csv", index=False)
        factors = ", ".join(repr(str(c)) for c in _r_factors(formula, df))
        (tmp / "c.R").write_text(COLD_R.format(data=tmp / "d.csv", factors=factors, formula=formula, slow=slow,
                                               repeats=repeats, converged="TRUE" if converged else "FALSE"))
        res = subprocess.run([rscript, str(tmp / "c.R")], capture_output=True, text=True, timeout=7200)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if res.returncode != 0:
        return "failed: " + (res.stderr.strip().splitlines() or ["?"])[-1][:60]
    imported, cold, warm, crit, conv, n_warm = res.stdout.split()[-6:]
    return {"import": float(imported), "cold": float(cold), "warm": float(warm), "crit": float(crit),
            "converged": float(conv) if conv != "NA" else None, "n_warm": int(float(n_warm))}


def cold_table(args) -> pd.DataFrame:
    """One row per problem: import, first fit (cold) and warm best-of seconds of ours, mixedlm and lme4, the ratios
    cold and warm, and our REML criterion minus lme4's at convergence."""
    rows = []
    for name, formula, df in cold_problems():
        if args.only and not any(k.lower() in name.lower() for k in args.only):
            continue
        print(f"… cold: {name} ({len(df):,} rows)", file=sys.stderr, flush=True)
        res = {"ours": cold_python("ours", formula, df, args.repeats),
               "mixedlm": cold_python("mixedlm", formula, df, args.repeats),
               "lme4": ("skipped (--skip-lme4)" if args.skip_lme4 else cold_lme4(formula, df, args.repeats))}
        row = {"problem": name, "rows": f"{len(df):,}"}
        for tool, r in res.items():
            ok = isinstance(r, dict)
            row[f"{tool} import s"] = f"{r['import']:.2f}" if ok else ""
            row[f"{tool} cold s"] = f"{r['cold']:.3f}" if ok else r
            row[f"{tool} warm s"] = f"{r['warm']:.3f}" if ok else ""
        ours = res["ours"] if isinstance(res["ours"], dict) else None
        for peer in ("mixedlm", "lme4"):
            r = res[peer]
            for when in ("cold", "warm"):
                row[f"{peer}/ours {when}"] = (f"{r[when] / ours[when]:.1f}x" if ours and isinstance(r, dict)
                                              else "—")
        lme4 = res["lme4"] if isinstance(res["lme4"], dict) else None
        row["REML crit ours - lme4 converged"] = (f"{ours['crit'] - lme4['converged']:.1e}"
                                                  if ours and lme4 and lme4["converged"] is not None else "—")
        rows.append(row)
    return pd.DataFrame(rows)


STREAM_SCRIPT = """
import resource, sys, time, warnings
import numpy as np, pandas as pd
sys.path.insert(0, {root!r})
from vrs_helpers import mixed
rows, chunk = {rows}, 1_000_000
sizes = dict(s=2300, a=3, b=3, c=3, d=4, e=4)
sd = dict(s=0.3, a=0.028, b=0.012, c=0.01, d=0.0045, e=0.0032)
rng = np.random.default_rng(7)
effects = {{k: rng.normal(0, sd[k], n) for k, n in sizes.items()}}
def chunks():
    g = np.random.default_rng(8)
    done = 0
    while done < rows:
        m = min(chunk, rows - done)
        cols = {{k: g.integers(0, n, m) for k, n in sizes.items()}}
        y = 0.3 + sum(effects[k][cols[k]] for k in sizes) + g.normal(0, 0.138, m)
        yield pd.DataFrame({{"y": y, **cols}})
        done += m
warnings.simplefilter("ignore")
t = time.perf_counter()
m = mixed.fit({formula!r}, chunks())
el = time.perf_counter() - t
# VmHWM: this process image's peak RSS (ru_maxrss would include the parent's peak inherited through fork/exec)
rss = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) / 1024
print(el, rss, m.nobs, m.variance_components.loc["s", "variance"], sd["s"] ** 2)
"""


def stream_benchmark(rows):
    res = subprocess.run([sys.executable, "-c", STREAM_SCRIPT.format(root=str(ROOT), rows=rows, formula=SIM)],
                         capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise RuntimeError(res.stderr)
    el, rss, n, v_s, truth = map(float, res.stdout.split())
    return el, rss, int(n), v_s, truth


def start_load():
    """A busy process on one core (the machine has two): what a parallel notebook run does to BLAS threads."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def fmt(t, note=""):
    return f"{t:.3f}" if t is not None else note


def ratio(peer, ours):
    return f"{peer / ours:.1f}x" if peer is not None else "—"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--statsmodels-timeout", type=int, default=60)
    ap.add_argument("--statsmodels-mem-gb", type=float, default=8.0)
    ap.add_argument("--stream-rows", type=int, default=10_000_000)
    ap.add_argument("--skip-lme4", action="store_true")
    ap.add_argument("--with-load", action="store_true",
                    help="keep one core busy with another process while timing (as when notebooks run in parallel)")
    ap.add_argument("--lme4-max-rows", type=int, default=2_000_000,
                    help="larger problems are not run in lme4 (minutes each); the table quotes the time recorded "
                         "in ../shared/reference where there is one")
    ap.add_argument("--only", nargs="+", default=None, metavar="WORD",
                    help="run only the problems whose name contains one of these words (e.g. --only slopes Chem97)")
    ap.add_argument("--cold", action="store_true",
                    help="time each tool in a fresh process: import, first fit (cold) and best of --repeats (warm) "
                         "on the real designs with public data (see above), instead of the warmed table")
    args = ap.parse_args(argv)
    if args.cold:
        table = cold_table(args)
        print("\nCold start (wall seconds in a fresh process: interpreter start excluded, the import apart; cold = the "
              f"first fit, warm = best of {args.repeats} more in the same process; lme4: lmer() with its defaults, "
              "one warm run when the first took over 20 s)\n")
        print(table.to_markdown(index=False) if _has_tabulate() else table.to_string(index=False))
        return 0
    rows = []
    load = start_load() if args.with_load else None
    try:
        for name, formula, df in problems():
            if args.only and not any(k.lower() in name.lower() for k in args.only):
                continue
            print(f"… {name} ({len(df):,} rows)", file=sys.stderr, flush=True)
            ours, mem, ll = time_ours(formula, df, args.repeats)
            ours_mt, _, _ = time_ours(formula, df, args.repeats, threads=None)
            ml, ml_note = time_mixedlm(formula, df, args.repeats)
            sm, sm_note = ((None, "—") if not all(t.strip().startswith("(1|") for t in formula.split("~")[1].split("+")
                                                if "|" in t)
                           else time_statsmodels(formula, df, args.statsmodels_timeout, args.statsmodels_mem_gb))
            r, r_ll = ((None, "skipped (--skip-lme4)") if args.skip_lme4
                       else time_lme4(formula, df, args.lme4_max_rows))
            r_note = r_ll if r is None else ""
            rec = recorded_lme4(len(df)) if r is None and str(r_note).startswith("recorded") else None
            rows.append({"problem": name, "rows": f"{len(df):,}", "ours s": fmt(ours),
                         "ours s, BLAS default threads": fmt(ours_mt), "ours MB": f"{mem:.0f}",
                         "mixedlm s": fmt(ml, ml_note), "statsmodels s": fmt(sm, sm_note), "lme4 s": fmt(r, r_note),
                         "mixedlm/ours": ratio(ml, ours), "statsmodels/ours": ratio(sm, ours),
                         "lme4/ours": ratio(r, ours) if rec is None else ratio(rec, ours) + " (vs recorded)",
                         "logLik ours - lme4": f"{ll - r_ll:.1e}" if r is not None else "—"})
    finally:
        if load is not None:
            load.kill()
    table = pd.DataFrame(rows)
    print("\nMixed-model fits (wall seconds; 'ours MB' = peak memory of the fit beyond the loaded data)\n")
    print(table.to_markdown(index=False) if _has_tabulate() else table.to_string(index=False))
    if args.stream_rows:
        print(f"\n… streaming {args.stream_rows:,} simulated rows in chunks of 10^6", file=sys.stderr, flush=True)
        el, rss, n, v_s, truth = stream_benchmark(args.stream_rows)
        print(f"\nStreamed fit: {n:,} rows from an iterator of 10^6-row chunks, {SIM}: {el:.1f} s, "
              f"peak RSS {rss:.0f} MB (whole process), sentence variance {v_s:.4f} (simulated {truth:.4f}).")
    return 0


def _has_tabulate():
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
