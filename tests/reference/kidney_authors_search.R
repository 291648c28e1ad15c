# The authors' circularity search of kidney_circularity.Rmd (StatNLP/empirical_methods), run on the published TEST set
# (the Rmd runs it on the unpublished training set): the power set of the six features most correlated with the gold
# label, each as s(x) with mgcv's default basis (k = 10), ranked by round(100 D2) descending, then by
# attr(logLik(m), "df") ascending - the Rmd's code with test_data for train_data. Issue 41, item 15.
# Command (from the repository root, R 4.2 + mgcv 1.8-41):
#   Rscript tests/reference/kidney_authors_search.R \
#       $VRS_DATA_DIR/empirical_methods/kidney_sofa_example/data/test_set_with_sofa_predictions.rds \
#       > tests/reference/kidney_authors_search_mgcv.json
suppressPackageStartupMessages(library(mgcv))
d <- readRDS(commandArgs(trailingOnly = TRUE)[1])
feats <- c("crea", "urine24", "artph", "bun", "temp", "lactate")   # data/book/circularity_2_4_3.json, kidney gold
sets <- unlist(lapply(seq_along(feats), function(r) combn(feats, r, simplify = FALSE)), recursive = FALSE)
rows <- lapply(sets, function(s) {
  m <- gam(as.formula(paste0("target ~ ", paste0("s(", s, ")", collapse = " + "))), data = d)
  list(features = s, dev_expl = summary(m)$dev.expl, complexity = attr(logLik(m), "df"))
})
fit <- sapply(rows, function(r) round(r$dev_expl * 100))
cx <- sapply(rows, function(r) r$complexity)
ord <- order(-fit, cx)
cat(sprintf('{\n  "_produced_by": "mgcv %s, %s; tests/reference/kidney_authors_search.R (command in the script)",\n',
            packageVersion("mgcv"), R.version.string))
cat('  "models": [\n')
for (i in seq_along(ord)) {
  r <- rows[[ord[i]]]
  cat(sprintf('    {"rank": %d, "features": [%s], "dev_expl": %.15g, "complexity": %.15g}%s\n', i,
              paste0('"', r$features, '"', collapse = ", "), r$dev_expl, r$complexity,
              if (i < length(ord)) "," else ""))
}
cat("  ]\n}\n")
