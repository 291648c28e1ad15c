# emmeans 1.8.4 pairwise contrasts of three systems with small-sample df (lmer.df = "kenward-roger" through pbkrtest
# 0.5.2, and "satterthwaite" through lmerTest 3.1-3), Tukey's and Holm's adjustments, on a simulated 3 systems x 3 runs
# x 200 items log (tests/reference/infer_data.py), for tests/mixed/test_mixed_pairwise.py (issue 28). Two models: runs
# random, and runs random with the system-by-item term.
# Fits at convergence: lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5)).
# Command (from the repository root, after tests/reference/infer_data.py):
#   Rscript tests/reference/pairwise_df.R tests/reference > tests/reference/pairwise_df_emmeans.json
suppressMessages({library(lmerTest); library(pbkrtest); library(emmeans); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
d <- read.csv(file.path(dir, "pairwise_three_systems.csv.gz"))
for (v in c("system", "run", "item")) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
emm_options(lmer.df = "kenward-roger", pbkrtest.limit = 1e5, lmerTest.limit = 1e5)
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
models <- list(runs_random = "score ~ system + (1|item) + (1|system:run)",
               system_item = "score ~ system + (1|item) + (1|system:item) + (1|system:run)")
frame <- function(x) { x <- as.data.frame(x); lapply(seq_len(nrow(x)), function(i) as.list(x[i, ])) }
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   lmerTest = as.character(packageVersion("lmerTest")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   emmeans = as.character(packageVersion("emmeans")),
                                   control = "lmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                   command = "Rscript tests/reference/pairwise_df.R tests/reference"),
            rows = nrow(d), models = list())
for (nm in names(models)) {
  f <- models[[nm]]
  m <- lmer(as.formula(f), data = d, REML = TRUE, control = ctrl)
  res <- list(formula = f, REMLcrit = as.numeric(REMLcrit(m)), theta = as.list(getME(m, "theta")))
  for (df in c("kenward-roger", "satterthwaite")) {
    e <- emmeans(m, ~ system, lmer.df = df)
    res[[df]] <- list(emmeans = frame(summary(e)),
                      tukey = frame(summary(pairs(e, adjust = "tukey"))),
                      holm = frame(summary(pairs(e, adjust = "holm"))),
                      none = frame(summary(pairs(e, adjust = "none"))))
  }
  out$models[[nm]] <- res
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
