# R's sample() as mgcv's thin-plate basis calls it to choose its knots (smooth.construct.tp.smooth.spec: when a
# covariate has nu > max.knots = 2000 distinct values, temp.seed(1) sets RNGkind("default", "default") and
# set.seed(1), then ind <- sample(1:nu, 2000, replace = FALSE) picks the knots among the sorted unique values).
# Recorded for tests/book/test_rsample.py: vrs_helpers.book.rsample must draw the same indices. Issue 41, item 8.
# Command (from the repository root; R >= 3.6, whose sample.kind default is "Rejection"):
#   Rscript tests/reference/r_sample.R > tests/reference/r_sample.json
RNGkind("Mersenne-Twister", "Inversion", "Rejection")
nus <- c(2001, 2048, 2500, 5000, 40000, 65536, 65537, 80671, 250000)
cat(sprintf('{\n  "_produced_by": "%s, RNGkind %s; tests/reference/r_sample.R",\n', R.version.string,
            paste(RNGkind(), collapse = "/")))
cat('  "command": "set.seed(seed); sample(1:nu, size, replace = FALSE)",\n')
set.seed(1)
cat(sprintf('  "runif_seed1": [%s],\n', paste(sprintf("%.17g", runif(5)), collapse = ", ")))
cat('  "cases": [\n')
cases <- c(lapply(nus, function(nu) list(nu = nu, size = 2000, seed = 1)),
           list(list(nu = 10, size = 10, seed = 42), list(nu = 100, size = 7, seed = 2021)))
for (i in seq_along(cases)) {
  cs <- cases[[i]]
  set.seed(cs$seed)
  s <- sample(1:cs$nu, cs$size, replace = FALSE)
  cat(sprintf('    {"nu": %d, "size": %d, "seed": %d, "sample": [%s]}%s\n', as.integer(cs$nu), as.integer(cs$size),
              as.integer(cs$seed), paste(s, collapse = ", "), if (i < length(cases)) "," else ""))
}
cat("  ]\n}\n")
