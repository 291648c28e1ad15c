"""Copy lme4's results for book chapter 3 into variance_tables_ch3.json, unchanged (full double precision).

- ``lme4``: the variance components for book Tables 3.1, 3.2, 3.4, 3.8-3.11 (R 4.2.2 / lme4 1.1-31 fits of the same
  public data: shared/reference/r/01_annotation_gstudy.R, 02_mt_hyperparameter_vc.R, 03_liver_grid_vc.R;
  results/*.json). They are the second reference a scorecard row needs to be marked `explained`
  (vrs_helpers.app.scorecard);
- ``lme4_table_3_9_optimizers``: the partial grid of Table 3.9 refitted with five optimizers (r/02b_partial_grid_
  optimizer_check.R): where each puts the two aliased dropout components, at the same REML criterion;
- ``emmeans_figure_3_5``: the delta_scheme contrasts within length classes of Figure 3.5 (lme4 + emmeans 1.8.4-1,
  r/05_delta_scheme_interaction.R), the reference rows of workbook 05.

The scripts and their outputs are also under tests/reference/ (r/, lme4_book_models.json), where the tests read them.

    python data/book/tools/lme4_variance_tables.py ../shared/reference
"""
import json
import sys
from pathlib import Path

SOURCES = {
    "Table 3.1": ("exp1_annotation_gstudy", ["modes", "Marking", "REML"]),
    "Table 3.2": ("exp1_annotation_gstudy", ["modes", "Post Edit", "REML"]),
    "Table 3.4": ("exp3_liver_grid_vc", ["fits", "rmd_6factor_no_epochs_REML"]),
    "Table 3.8": ("exp2_mt_hyperparameter_vc", ["grids", "partial", "substantial", "REML_rmd_ctrl"]),
    "Table 3.9": ("exp2_mt_hyperparameter_vc", ["grids", "partial", "full", "REML_rmd_ctrl"]),
    "Table 3.10": ("exp2_mt_hyperparameter_vc", ["grids", "full", "substantial", "REML_rmd_ctrl"]),
    "Table 3.11": ("exp2_mt_hyperparameter_vc", ["grids", "full", "full", "REML_rmd_ctrl"]),
}


def main(reference: Path) -> None:
    target = Path(__file__).resolve().parent.parent / "variance_tables_ch3.json"
    book = json.loads(target.read_text())
    out = {"_source": "R 4.2.2, lme4 1.1-31 (REML, the Rmd's control settings), fitted to the same public data: "
                      "shared/reference/results/<file>.json at <path>; copied by data/book/tools/"
                      "lme4_variance_tables.py. Percent = variance / total variance x 100 of lme4's components."}
    for table, (name, path) in SOURCES.items():
        fit = json.loads((reference / "results" / f"{name}.json").read_text())
        for p in path:
            fit = fit[p]
        vc = fit["variance_components"]
        total = sum(vc.values())
        out[table] = {"file": f"{name}.json", "path": "/".join(path), "formula": fit["formula"],
                      "loglik": fit["loglik"], "variance": vc,
                      "percent": {k: 100 * v / total for k, v in vc.items()}}
    book["lme4"] = out
    check = json.loads((reference / "results" / "exp2b_partial_grid_optimizer_check.json").read_text())
    book["lme4_table_3_9_optimizers"] = {
        "_source": "R 4.2.2, lme4 1.1-31: the REML fit of Table 3.9's model on the partial grid with five optimizer "
                   "settings (shared/reference/r/02b_partial_grid_optimizer_check.R, results/exp2b_partial_grid_"
                   "optimizer_check.json; tests/reference/r/); values copied unchanged",
        "formula": check["formula"],
        "fits": {opt: {"variance": fit["variance_components"], "percent": fit["percent"],
                       "reml_criterion": fit["reml_criterion"]} for opt, fit in check["fits"].items()},
        "reml_criterion_at_the_books_split": check["reml_crit_lme4_with_enc_ddh_from_book"]}
    exp5 = json.loads((reference / "results" / "exp5_delta_scheme_interaction.json").read_text())
    book["emmeans_figure_3_5"] = {
        "_source": "R 4.2.2, lme4 1.1-31 REML fit of ter ~ src_length_class * delta_scheme + (1 | sentence_id), "
                   "emmeans 1.8.4-1 contrasts of delta_scheme within length classes (z tests; Tukey = unadjusted "
                   "for one contrast): shared/reference/r/05_delta_scheme_interaction.R, results/exp5_delta_scheme_"
                   "interaction.json; values copied unchanged",
        **{grid: {"n_rows": exp5["datasets"][grid]["n_rows"],
                  "contrasts": exp5["datasets"][grid]["contrasts_delta_within_length_tukey"]}
           for grid in ("partial", "full")}}
    target.write_text(json.dumps(book, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
