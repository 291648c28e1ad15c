"""Copy lme4's variance components for book Tables 3.1, 3.2, 3.4, 3.8-3.11 into variance_tables_ch3.json.

The values come from R 4.2.2 / lme4 1.1-31 fits of the same public data (the project's reference computations:
shared/reference/r/01_annotation_gstudy.R, 02_mt_hyperparameter_vc.R, 03_liver_grid_vc.R; results/*.json). They are
the second reference a scorecard row needs to be marked `explained` (vrs_helpers.scorecard).

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
    target.write_text(json.dumps(book, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
