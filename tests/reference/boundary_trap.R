# lme4 reference for tests/mixed/test_mixed_slopes.py::test_not_trapped_at_zero_variances (see boundary_trap_data.py).
suppressPackageStartupMessages({ library(lme4); library(jsonlite) })
d <- read.csv(commandArgs(trailingOnly = TRUE)[1], stringsAsFactors = FALSE)
d$item <- factor(d$item); d$run <- factor(d$run)
f <- y ~ x + (x || run) + (1 | item)
out <- list(`_produced_by` = paste("R", getRversion(), "lme4", packageVersion("lme4"), "optimizer bobyqa"),
            formula = "y ~ x + (x||run) + (1|item)")
for (reml in c(FALSE, TRUE)) {
  m <- lmer(f, data = d, REML = reml, control = lmerControl(optimizer = "bobyqa"))
  vc <- as.data.frame(VarCorr(m))
  out[[if (reml) "REML" else "ML"]] <- list(logLik = as.numeric(logLik(m)),
    theta = as.list(getME(m, "theta")), vcov = setNames(as.list(vc$vcov), paste(vc$grp, vc$var1, sep = ".")))
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
