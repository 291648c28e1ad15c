"""Copy mgcv's fits of section 2.4.3 into circularity_2_4_3.json (the "mgcv" entries), at full double precision.

The values come from R 4.2.2 / mgcv 1.8-41 fits of the book's models on the published TEST sets (the project's
reference computations: shared/reference/r/06_gam_circularity.R, one ``Rscript r/06_gam_circularity.R <key> gam`` per
model through r/run_exp6.sh, and r/06b_gam_distill_search.R for the teachers' five most correlated features;
results/exp6_<key>.json and exp6b_gam_distill_search.json, written with jsonlite digits = NA). The scripts and the
same values are under tests/reference/ (r/, mgcv_book_models.json), where the tests read them.

Workbook 02 compares ours with these values in its reference rows (vrs_helpers.app.scorecard, kind "reference") and
names them as the second reference of its book rows. D2 is stored in percent, 100 x mgcv's ``deviance_explained``
(the only operation applied); max |f| per feature is mgcv's ``max_abs_term`` of the feature's smooth.

    python data/book/tools/mgcv_circularity.py ../shared/reference
"""
import json
import sys
from pathlib import Path

# analysis -> exp6 keys of the circular-only, without-circular and all-features models
MODELS = {
    ("patent", "gold"): ("ir_circ", "ir_nocirc", "ir_all"),
    ("liver", "gold"): ("liver_circ", "liver_nocirc", "liver_all"),
    ("kidney", "gold"): ("kidney_circ", "kidney_nocirc", "kidney_all"),
    ("liver", "teacher_circ"): ("liver_distill_circ", "liver_distill_nocirc", "liver_distill_all"),
    ("kidney", "teacher_circ"): ("kidney_distill_circ", "kidney_distill_nocirc", "kidney_distill_all"),
}
TEXT_FEATURES = ("liver_nocirc_hzv", "liver_all_hzv")  # liver gold with the book text's list (hzv for thrombo)


def _strip(term: str) -> str:
    return term[2:-1] if term.startswith("s(") and term.endswith(")") else term


def main(reference: Path) -> None:
    target = Path(__file__).resolve().parent.parent / "circularity_2_4_3.json"
    book = json.loads(target.read_text())

    def fit(key):
        return json.loads((reference / "results" / f"exp6_{key}.json").read_text())

    search = json.loads((reference / "results" / "exp6b_gam_distill_search.json").read_text())
    for (dataset, analysis), (circ, nocirc, full) in MODELS.items():
        spec = book[dataset][analysis]
        fits = {name: fit(key) for name, key in (("circular", circ), ("without", nocirc), ("all", full))}
        circular = set(spec["circular"])
        mg = {"source": {name: f"exp6_{key}" for name, key in (("circular", circ), ("without", nocirc),
                                                               ("all", full))},
              "d2_circular": 100 * fits["circular"]["deviance_explained"],
              "d2_without": 100 * fits["without"]["deviance_explained"],
              "d2_all": 100 * fits["all"]["deviance_explained"],
              "complexity_all": fits["all"]["loglik_df"]}
        if analysis == "gold":   # the nullification evidence: shapes of the other features without / with c*
            mg["max_abs_f_without"] = {_strip(t): v for t, v in fits["without"]["max_abs_term"].items()}
            mg["max_abs_f_with"] = {_strip(t): v for t, v in fits["all"]["max_abs_term"].items()
                                    if _strip(t) not in circular}
        else:                    # the students' five candidate features (06b: largest |r| with sofa_circ)
            mg["top5"] = search[dataset]["top5_features"]
            mg["source"]["top5"] = "exp6b_gam_distill_search"
        if (dataset, analysis) == ("liver", "gold"):
            nocirc_text, all_text = (fit(k) for k in TEXT_FEATURES)
            mg["d2_without_text_features"] = 100 * nocirc_text["deviance_explained"]
            mg["d2_all_text_features"] = 100 * all_text["deviance_explained"]
            mg["source"].update(dict(zip(("without_text_features", "all_text_features"),
                                         (f"exp6_{k}" for k in TEXT_FEATURES), strict=True)))
        spec["mgcv"] = mg
    book["_source"] = (
        "Riezler & Hagmann, section 2.4.3 (Tables 2.3-2.7, Figures 2.7-2.21), typed in from the text; D2 in percent "
        "as printed. The 'mgcv' entries are R 4.2.2 / mgcv 1.8-41 fits of the same specifications on the published "
        "TEST sets, copied at full precision by data/book/tools/mgcv_circularity.py from shared/reference/results/"
        "exp6_<key>.json (r/06_gam_circularity.R via r/run_exp6.sh) and exp6b_gam_distill_search.json "
        "(r/06b_gam_distill_search.R); 'source' names the file of each value. The scripts and values are also in "
        "tests/reference/. The book fitted on the training sets, which are not published.")
    liver = book["liver"]["gold"]
    liver["features_note"] = ("the liver_circularity.Rmd list (thrombo); the book's text names hzv instead of "
                              "thrombo (text_features; mgcv's fits of that list: d2_without_text_features, "
                              "d2_all_text_features)")
    target.write_text(json.dumps(book, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
