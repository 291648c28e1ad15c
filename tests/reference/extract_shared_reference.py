"""Regenerate the R reference values under tests/reference/ from a shared/reference folder (README.md here).

    python tests/reference/extract_shared_reference.py [SHARED_REFERENCE_DIR] [--check]

SHARED_REFERENCE_DIR (default ../shared/reference beside the checkout) holds the R scripts in r/, their output in
results/*.json and the simulated data in sim/. This script copies, without changing any value:

- lme4_book_models.json: the fit records and test statistics tests/mixed/test_mixed_reference.py compares with (lme4,
  lmerTest, emmeans; experiments 1-5 and 7, and 2b: the partial grid of Table 3.9 refitted with five optimizers),
  each record cut to the keys the tests read plus its identification;
- mgcv_book_models.json: the mgcv fits of experiment 6 (gold labels and the distillation students) and the
  distillation power-set search of experiment 6b, which tests/book/test_gam.py and tests/book/test_circularity.py
  compare with;
- sim_N1e4.csv.gz: the simulated data set of about 10^4 rows (byte for byte);
- sim_anova.json: for the simulated sets of 10^4 and 10^5 rows, the mean and the ANOVA sums of squares (see
  sim_anova() below) from which the tests rebuild a data set with the same likelihood;
- r/: the R scripts that produced the values (and helpers.R, which they source).

With --check nothing is written: the script exits with status 1 if any file here differs from what it would write.
"""

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
DEFAULT_SHARED = HERE.parents[2] / "shared" / "reference"

SOFTWARE = ("R 4.2.2 Patched (2022-11-10 r83330), lme4 1.1-31, Matrix 1.5-3, mgcv 1.8-41, lmerTest 3.1-3, "
            "emmeans 1.8.4-1; reference (single-threaded) BLAS, x86_64-pc-linux-gnu")

# what a fit record keeps: its identification and every quantity the tests compare
FIT_KEYS = ("formula", "data", "method", "n_rows", "n_groups", "variance_components", "loglik", "loglik_type",
            "fixed_effects", "fixed_effects_se", "theta", "sigma", "singular", "optimizer", "conv_messages")

# experiment -> (script, command, [(path inside the result file, kind)]); kind "fit" keeps FIT_KEYS of a record,
# "value" keeps the value as it is (numbers and the emmeans tables)
LME4 = {
    "exp1_annotation_gstudy": ("01_annotation_gstudy.R", "Rscript r/01_annotation_gstudy.R", [
        (("modes", mode, meth), "fit") for mode in ("Marking", "Post Edit") for meth in ("REML", "ML")]),
    "exp2_mt_hyperparameter_vc": ("02_mt_hyperparameter_vc.R", "Rscript r/02_mt_hyperparameter_vc.R", [
        (("grids", grid, model, ctrl), "fit") for grid in ("partial", "full") for model in ("substantial", "full")
        for ctrl in ("REML_rmd_ctrl", "ML_rmd_ctrl")]),
    "exp3_liver_grid_vc": ("03_liver_grid_vc.R", "Rscript r/03_liver_grid_vc.R", [
        (("fits", fit), "fit") for fit in ("brief_7factor_REML", "brief_7factor_ML", "rmd_6factor_no_epochs_REML",
                                           "rmd_6factor_no_epochs_ML")]),
    "exp4_mt_significance": ("04_mt_significance.R", "Rscript r/04_mt_significance.R", [
        *((("b_lmm", fit), "fit") for fit in ("fit_REML_general", "fit_ML_general", "fit_ML_restricted")),
        *((("b_lmm", k), "value") for k in ("glrt_chisq", "glrt_df", "p_glrt")),
        *((("c_pairwise", k), "value") for k in ("method", "emmeans", "contrasts_tukey", "contrasts_unadjusted")),
        *((("d_length_interaction", fit), "fit") for fit in ("fit_REML_interaction", "fit_ML_interaction",
                                                             "fit_ML_null", "fit_ML_additive")),
        *((("d_length_interaction", k), "value") for k in (
            "glrt_vs_null_chisq", "glrt_vs_null_df", "p_glrt_vs_null", "glrt_interaction_only_chisq",
            "glrt_interaction_only_df", "p_glrt_interaction_only", "pairwise_method", "contrasts_tukey",
            "contrasts_unadjusted")),
    ]),
    "exp2b_partial_grid_optimizer_check": ("02b_partial_grid_optimizer_check.R",
                                           "Rscript r/02b_partial_grid_optimizer_check.R", [
        *(((k,), "value") for k in ("formula", "method", "n_rows", "theta_term_order", "reml_crit_at_lme4_optimum",
                                    "reml_crit_at_book_values_rounded", "reml_crit_lme4_with_enc_ddh_from_book")),
        *((("fits", opt, k), "value") for opt in ("nloptwrap_rmd", "bobyqa", "Nelder_Mead", "nlminbwrap",
                                                  "bobyqa_tight")
          for k in ("variance_components", "percent", "reml_criterion", "theta"))]),
    "exp5_delta_scheme_interaction": ("05_delta_scheme_interaction.R", "Rscript r/05_delta_scheme_interaction.R", [
        *((("datasets", grid, fit), "fit") for grid in ("partial", "full")
          for fit in ("fit_REML", "fit_ML_interaction", "fit_ML_additive")),
        *((("datasets", grid, k), "value") for grid in ("partial", "full")
          for k in ("n_rows", "glrt_interaction_chisq", "glrt_interaction_df", "p_glrt_interaction",
                    "contrasts_delta_within_length_tukey", "contrasts_delta_within_length_unadjusted"))]),
    **{f"exp7_sim_N{n}_{meth}_default": (
        "07_sim_fit.R", f"Rscript r/07_sim_generate.R; r/run_exp7.sh {n} (runs Rscript r/07_sim_fit.R {n} {meth} "
        f"default)", [((), "fit")]) for n in ("1e4", "1e5") for meth in ("REML", "ML")},
}

MGCV_KEYS = ("liver_circ", "liver_nocirc", "liver_all", "kidney_nocirc", "ir_circ", "ir_nocirc", "ir_all",
             "kidney_circ", "kidney_all", "liver_nocirc_hzv", "liver_all_hzv", "liver_distill_circ",
             "liver_distill_nocirc", "liver_distill_all", "kidney_distill_circ", "kidney_distill_nocirc",
             "kidney_distill_all")
GAM_KEYS = ("key", "engine", "data_file", "formula", "family", "method", "basis", "n_rows", "deviance_explained",
            "edf_total", "edf_smooths", "loglik_df", "gcv_ubre", "max_abs_term", "q99_abs_term_over_data",
            "converged")
SEARCH_KEYS = ("data_file", "top5_features", "correlations", "ranking")  # experiment 6b, per dataset

R_SCRIPTS = ("helpers.R", "01_annotation_gstudy.R", "02_mt_hyperparameter_vc.R", "02b_partial_grid_optimizer_check.R",
             "03_liver_grid_vc.R", "04_mt_significance.R", "05_delta_scheme_interaction.R", "06_gam_circularity.R",
             "06b_gam_distill_search.R", "run_exp6.sh", "07_sim_generate.R", "07_sim_fit.R", "run_exp7.sh")

SIM_FACTORS = ("s", "a", "b", "c", "d", "e")


def _get(d, path):
    for p in path:
        d = d[p]
    return d


def _put(d, path, value):
    for p in path[:-1]:
        d = d.setdefault(p, {})
    d[path[-1]] = value


def _fit(rec: dict) -> dict:
    missing = [k for k in ("formula", "method", "n_rows", "n_groups", "variance_components", "loglik",
                           "fixed_effects", "theta", "singular") if k not in rec]
    if missing:
        raise KeyError(f"fit record without {missing}")
    return {k: rec[k] for k in FIT_KEYS if k in rec}


def lme4_models(shared: Path) -> dict:
    experiments, out = {}, {}
    for exp, (script, command, items) in LME4.items():
        res = json.loads((shared / "results" / f"{exp}.json").read_text())
        entry = {}
        for path, kind in items:
            value = _get(res, path)
            value = _fit(value) if kind == "fit" else value
            if path:
                _put(entry, path, value)
            else:
                entry = value
        out[exp] = entry
        experiments[exp] = {"script": f"r/{script}", "command": command,
                            "experiment": res.get("experiment", "lme4 scaling on simulated crossed data (exp7)"),
                            "env": res["env"]}
    produced = {"software": SOFTWARE,
                "source": "shared/reference/results/<experiment>.json as written by the R script named per "
                          "experiment (copied to tests/reference/r/; helpers.R write_result, jsonlite digits=NA); "
                          "values copied unchanged, records cut to the keys the tests read",
                "extracted_by": "tests/reference/extract_shared_reference.py",
                "experiments": experiments}
    return {"_produced_by": produced, **out}


def mgcv_models(shared: Path) -> dict:
    out, envs = {}, {}
    for key in MGCV_KEYS:
        res = json.loads((shared / "results" / f"exp6_{key}.json").read_text())
        out[f"exp6_{key}"] = {k: res[k] for k in GAM_KEYS if k in res}
        envs[f"exp6_{key}"] = res["env"]
    search = json.loads((shared / "results" / "exp6b_gam_distill_search.json").read_text())
    out["exp6b_gam_distill_search"] = {
        "experiment": search["experiment"],
        **{ds: {k: search[ds][k] for k in SEARCH_KEYS} for ds in ("liver", "kidney")}}
    envs["exp6b_gam_distill_search"] = search["env"]
    produced = {"software": SOFTWARE, "script": "r/06_gam_circularity.R (exp6_<key>), r/06b_gam_distill_search.R "
                                                "(exp6b_gam_distill_search)",
                "command": "r/run_exp6.sh " + " ".join(MGCV_KEYS) + " (one Rscript r/06_gam_circularity.R <key> "
                           "gam per model); Rscript r/06b_gam_distill_search.R",
                "source": "shared/reference/results/exp6_<key>.json and exp6b_gam_distill_search.json as written by "
                          "the scripts (helpers.R write_result, jsonlite digits=NA: full double precision), values "
                          "copied unchanged",
                "extracted_by": "tests/reference/extract_shared_reference.py", "env": envs}
    return {"_produced_by": produced, **out}


def sim_anova(shared: Path) -> dict:
    """Mean and ANOVA sums of squares of the simulated data sets (independent of any model fit).

    The design is balanced: every cell of s x a x b x c x d x e holds one observation. For such a design the
    matrices Z_f Z_f' of the random-intercept model y ~ 1 + (1|s) + ... + (1|e) are n_f (P_0 + P_f), with P_0 the
    projection on the mean and P_f on the centred main effect of f, mutually orthogonal. So the covariance matrix is
    diagonal in the decomposition y = mean + sum_f P_f y + residual, and the ML and REML likelihoods depend on y only
    through N, the mean, ||P_f y||^2 (SS_f) and the residual sum of squares: any data set on the same design with the
    same eight numbers has the same likelihood function and hence the same lme4 estimates.
    """
    meta = json.loads((shared / "sim" / "sim_meta.json").read_text())
    out = {}
    for n in ("1e4", "1e5"):
        with gzip.open(shared / "sim" / f"sim_N{n}.csv.gz", "rt") as fh:
            df = pd.read_csv(fh)
        y = df["y"].to_numpy(dtype=float)
        N = len(y)
        levels = {f: int(df[f].nunique()) for f in SIM_FACTORS}
        if len(df.drop_duplicates(list(SIM_FACTORS))) != N or math.prod(levels.values()) != N:
            raise ValueError(f"sim_N{n}: not one observation per cell of a full grid")
        mean = math.fsum(y) / N
        ss = {}
        for f in SIM_FACTORS:
            means = df.groupby(f)["y"].mean().to_numpy()
            ss[f] = N // levels[f] * math.fsum((means - mean) ** 2)
        total = math.fsum((y - mean) ** 2)
        out[f"N{n}"] = {"file": f"sim_N{n}.csv.gz", "seed": meta["files"][n]["seed"], "N": N, "levels": levels,
                        "mean": mean, "ss": ss, "ss_residual": total - math.fsum(ss.values()),
                        "ss_total": total}
    produced = {"data": "shared/reference/sim/sim_N{1e4,1e5}.csv.gz, simulated by r/07_sim_generate.R "
                        "(R 4.2.2, Mersenne-Twister/Inversion, seeds 101 and 102); the lme4 fits of these files are "
                        "exp7_sim_N* in lme4_book_models.json",
                "computed_by": "tests/reference/extract_shared_reference.py sim_anova() with numpy/math.fsum "
                               "(no model fit): mean, SS_f = (N / levels_f) * sum over the levels of f of "
                               "(level mean - mean)^2, SS_residual = SS_total - sum_f SS_f",
                "design": meta["description"], "formula": meta["formula"]}
    return {"_produced_by": produced, **out}


def _dump(obj) -> str:
    return json.dumps(obj, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("shared", nargs="?", type=Path, default=DEFAULT_SHARED, help="the shared/reference folder")
    ap.add_argument("--check", action="store_true", help="compare with the files here instead of writing them")
    args = ap.parse_args(argv)
    shared = args.shared.resolve()
    if not (shared / "results").is_dir():
        ap.error(f"{shared} has no results/ folder")
    files = {
        "lme4_book_models.json": _dump(lme4_models(shared)).encode(),
        "mgcv_book_models.json": _dump(mgcv_models(shared)).encode(),
        "sim_anova.json": _dump(sim_anova(shared)).encode(),
        "sim_N1e4.csv.gz": (shared / "sim" / "sim_N1e4.csv.gz").read_bytes(),
        **{f"r/{name}": (shared / "r" / name).read_bytes() for name in R_SCRIPTS},
    }
    differ = []
    for name, content in files.items():
        target = HERE / name
        if args.check:
            if not target.is_file() or target.read_bytes() != content:
                differ.append(name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if name.endswith(".sh") else 0o644)
    if args.check:
        print("differs: " + ", ".join(differ) if differ else f"all {len(files)} files match {shared}")
        return 1 if differ else 0
    print(f"wrote {len(files)} files under {HERE} from {shared}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
