# lme4 reference values for tests/mixed/test_mixed_slopes.py (random slopes and nested syntax on small simulated data;
# see mixed_slopes_data.py). Command:
#   python tests/reference/mixed_slopes_data.py DIR &&
#   Rscript tests/reference/mixed_slopes.R DIR > tests/reference/mixed_slopes_lme4.json
# Every fit uses lmerControl(optimizer = "bobyqa") (minqa's bobyqa, default tolerances); recorded per fit.
suppressPackageStartupMessages({
  library(lme4)
  library(jsonlite)
})
dir <- commandArgs(trailingOnly = TRUE)[1]
read <- function(name) read.csv(file.path(dir, paste0(name, ".csv")), stringsAsFactors = FALSE)
ctrl <- lmerControl(optimizer = "bobyqa")

record <- function(data_name, formula, method, m) {
  vc <- as.data.frame(VarCorr(m))
  th <- getME(m, "theta")
  fe <- summary(m)$coefficients
  crit <- if (method == "REML") m@devcomp$cmp[["REML"]] else m@devcomp$cmp[["dev"]]
  conv <- m@optinfo$conv$lme4$messages
  list(
    data = data_name, formula = formula, method = method, optimizer = "bobyqa",
    n_rows = nobs(m),
    logLik = as.numeric(logLik(m)),
    criterion = crit,
    criterion_name = if (method == "REML") "REMLcrit" else "deviance",
    theta = list(names = I(names(th)), values = I(unname(th))),
    sigma = sigma(m),
    fixed_effects = list(names = I(rownames(fe)), estimate = I(unname(fe[, "Estimate"])),
                         se = I(unname(fe[, "Std. Error"]))),
    varcorr = lapply(seq_len(nrow(vc)), function(i) list(
      grp = vc$grp[i],
      var1 = if (is.na(vc$var1[i])) NULL else vc$var1[i],
      var2 = if (is.na(vc$var2[i])) NULL else vc$var2[i],
      vcov = vc$vcov[i], sdcor = vc$sdcor[i])),
    ngrps = as.list(ngrps(m)),
    singular = isSingular(m),
    convergence_messages = if (is.null(conv)) list() else as.list(conv),
    optimizer_warnings = as.list(m@optinfo$warnings)
  )
}

fits <- list()
lrts <- list()
add <- function(key, data_name, d, formula, method) {
  m <- lmer(as.formula(formula), data = d, REML = (method == "REML"), control = ctrl)
  fits[[key]] <<- record(data_name, formula, method, m)
  invisible(m)
}

sl <- read("sleep_like")
add("sleep_corr_reml", "sleep_like", sl, "y ~ x + grp + (1 + x | subject)", "REML")
m1 <- add("sleep_corr_ml", "sleep_like", sl, "y ~ x + grp + (1 + x | subject)", "ML")
add("sleep_corr_implicit_reml", "sleep_like", sl, "y ~ x + grp + (x | subject)", "REML")
add("sleep_corr_implicit_ml", "sleep_like", sl, "y ~ x + grp + (x | subject)", "ML")
m_slope <- add("sleep_slope_only_ml", "sleep_like", sl, "y ~ x + grp + (0 + x | subject)", "ML")
add("sleep_uncorr_reml", "sleep_like", sl, "y ~ x + grp + (1 + x || subject)", "REML")
m_uncorr <- add("sleep_uncorr_ml", "sleep_like", sl, "y ~ x + grp + (1 + x || subject)", "ML")
m0 <- add("sleep_intercept_ml", "sleep_like", sl, "y ~ x + grp + (1 | subject)", "ML")
lrt <- function(key, k0, k1, a) {
  lrts[[key]] <<- list(m0 = k0, m1 = k1, note = "anova(m0, m1) on ML fits (no refit)",
                       Chisq = a$Chisq[2], Df = a$Df[2], p_value = a[["Pr(>Chisq)"]][2],
                       npar = a$npar, logLik = a$logLik)
}
lrt("sleep_intercept_vs_corr", "sleep_intercept_ml", "sleep_corr_ml", anova(m0, m1))
lrt("sleep_intercept_vs_uncorr", "sleep_intercept_ml", "sleep_uncorr_ml", anova(m0, m_uncorr))
lrt("sleep_uncorr_vs_corr", "sleep_uncorr_ml", "sleep_corr_ml", anova(m_uncorr, m1))
lrt("sleep_slope_only_vs_corr", "sleep_slope_only_ml", "sleep_corr_ml", anova(m_slope, m1))

cs <- read("crossed_slopes")
add("crossed_reml", "crossed_slopes", cs, "y ~ f + x + (1 + x | item) + (1 | rater)", "REML")
add("crossed_ml", "crossed_slopes", cs, "y ~ f + x + (1 + x | item) + (1 | rater)", "ML")
# singular: the rater slope variance is zero in the simulation and lme4 puts it on the boundary (theta = 0)
add("crossed_rater_slope_singular_reml", "crossed_slopes", cs, "y ~ f + x + (1 + x | item) + (0 + x | rater)", "REML")

ne <- read("nested")
add("nested_slash_reml", "nested", ne, "y ~ x + (1 | school/class)", "REML")
add("nested_explicit_reml", "nested", ne, "y ~ x + (1 | school) + (1 | school:class)", "REML")
add("nested_slope_reml", "nested", ne, "y ~ x + (1 + x | school) + (1 | school:class)", "REML")
# not the same model: class labels are reused across schools, so (1 | class) pools c1 of every school
add("nested_wrong_class_reml", "nested", ne, "y ~ x + (1 | school) + (1 | class)", "REML")

# checks that mixed_slopes_data.make() still produces these data (row count and column sums)
data_checks <- lapply(list(sleep_like = sl, crossed_slopes = cs, nested = ne, constant_slope = read("constant_slope")),
                      function(d) list(n_rows = nrow(d), sum_x = sum(d$x), sum_y = sum(d$y)))

cmd <- paste("python tests/reference/mixed_slopes_data.py DIR &&",
             "Rscript tests/reference/mixed_slopes.R DIR > tests/reference/mixed_slopes_lme4.json")
out <- c(list(`_produced_by` = list(
  software = sprintf("lme4 %s, Matrix %s, jsonlite %s, %s", packageVersion("lme4"), packageVersion("Matrix"),
                     packageVersion("jsonlite"), R.version.string),
  script = "tests/reference/mixed_slopes.R", command = cmd,
  data = "tests/reference/mixed_slopes_data.py (make(name); CSV with float_format %.17g)",
  platform = R.version$platform)),
  data_checks = list(data_checks), fits = list(fits), lrt = list(lrts))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE, null = "null"), "\n")
