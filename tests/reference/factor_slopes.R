# lme4 fits with random slopes of factors, for tests/mixed/test_mixed_factor_slopes.py.
# Command (from the repository root, after tests/reference/factor_slopes_data.py):
#   Rscript tests/reference/factor_slopes.R tests/reference > tests/reference/factor_slopes_lme4.json
# Also writes tests/reference/fhch2010.csv.gz (afex's fhch2010: Freeman, Heathcote, Chalmers & Hockley 2010,
# lexical decision and naming, 13,222 trials, 45 participants x 600 words; the columns the models use).
suppressMessages({library(lme4); library(afex); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
data(fhch2010)
fh <- fhch2010[, c("id", "task", "stimulus", "item", "log_rt", "correct")]
fh$correct <- as.integer(fh$correct)
gz <- gzfile(file.path(dir, "fhch2010.csv.gz"), "w"); write.csv(fh, gz, row.names = FALSE); close(gz)
ev <- read.csv(file.path(dir, "factor_slopes_eval.csv.gz"))
ev$system <- factor(ev$system, levels = c("base", "cand", "big"))
ev$seed <- factor(ev$seed); ev$item <- factor(ev$item)

summ <- function(m, formula, data_name) {
  vc <- as.data.frame(VarCorr(m))
  vc$var1[is.na(vc$var1)] <- ""; vc$var2[is.na(vc$var2)] <- ""
  list(formula = formula, data = data_name, REML = isREML(m), logLik = as.numeric(logLik(m)),
       fixef = as.list(fixef(m)), varcorr = vc[, c("grp", "var1", "var2", "vcov", "sdcor")],
       theta = as.list(getME(m, "theta")), singular = isSingular(m))
}
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))
fits <- list(
  fh_factor_slopes = list("log_rt ~ task*stimulus + (stimulus|id) + (task|item)", fh, "fhch2010"),
  eval_system_by_item = list("score ~ system + (1 + system|item) + (1|system:seed)", ev, "eval_log"),
  eval_no_intercept = list("score ~ system + (0 + system|item) + (1|system:seed)", ev, "eval_log"),
  eval_double_bar = list("score ~ system + (system||item) + (1|system:seed)", ev, "eval_log")
)
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   afex = as.character(packageVersion("afex")),
                                   command = "Rscript tests/reference/factor_slopes.R tests/reference"),
            levels = list(fhch2010 = list(task = levels(fh$task), stimulus = levels(fh$stimulus)),
                          eval_log = list(system = levels(ev$system))),
            fits = list())
for (nm in names(fits)) {
  f <- fits[[nm]]
  t0 <- proc.time()[["elapsed"]]
  m <- lmer(as.formula(f[[1]]), data = f[[2]], REML = TRUE, control = ctrl)
  res <- summ(m, f[[1]], f[[3]])
  res$seconds <- proc.time()[["elapsed"]] - t0
  out$fits[[nm]] <- res
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
