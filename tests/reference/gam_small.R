# mgcv reference values for tests/book/test_gam.py (small simulated data; see gam_small_data.py).
# Command: python tests/reference/gam_small_data.py /tmp/gam_small.csv &&
#          Rscript tests/reference/gam_small.R /tmp/gam_small.csv > tests/reference/gam_small_mgcv.json
suppressPackageStartupMessages(library(mgcv))
d <- read.csv(commandArgs(trailingOnly = TRUE)[1])
out <- function(name, m, last = FALSE) {
  s <- summary(m)
  cat(sprintf('  "%s": {"dev_expl": %.10g, "edf": %.10g, "edf_terms": [%s], "gcv_ubre": %.10g}', name, s$dev.expl,
              sum(m$edf), paste(sprintf("%.10g", s$edf), collapse = ", "), m$gcv.ubre), if (last) "\n" else ",\n")
}
cat(sprintf('{\n  "_produced_by": "mgcv %s, %s; tests/reference/gam_small.R",\n', packageVersion("mgcv"), R.version.string))
out("gauss_x1_x2", gam(y ~ s(x1) + s(x2), data = d))
out("gauss_x1_x2_x3", gam(y ~ s(x1) + s(x2) + s(x3), data = d))
out("gauss_x1_k20", gam(y ~ s(x1, k = 20), data = d))
out("binom_x1_x2", gam(yb ~ s(x1) + s(x2), family = binomial, data = d))
out("binom_x1_x2_x3", gam(yb ~ s(x1) + s(x2) + s(x3), family = binomial, data = d))
# mgcv's Newton stops at a local UBRE optimum for yb ~ s(x1) + s(x2); the same model with x2 linear scores lower:
out("binom_x1_linear_x2", gam(yb ~ s(x1) + x2, family = binomial, data = d), last = TRUE)
cat("}\n")
