# glmer reference for the Inspect-logs acceptance case of issue 29 (tests/evaluate/test_harness_glmer.py): the
# chi-square LRT of the model difference with items and model-by-item variation,
#   correct ~ model + (1|id) + (1|model:id)  against  correct ~ 1 + (1|id) + (1|model:id),
# on two models x 240 samples x 3 epochs of 0/1 scores.
# Command (from the repository root):
#   PYTHONPATH=. .venv/bin/python tests/reference/harness_glmer_data.py && Rscript tests/reference/harness_glmer.R
# Reads tests/reference/harness_glmer.csv.gz, writes tests/reference/harness_glmer_lme4.json.
# Fitted at convergence (glmerControl(tolPwrss = 1e-12, bobyqa with rhoend = 1e-10)) and with glmer's defaults.
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
out <- "tests/reference"
d <- read.csv(file.path(out, "harness_glmer.csv.gz"))
d$model <- factor(d$model, levels = c("model-a", "model-b")); d$id <- factor(d$id)
tight <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
f0 <- correct ~ 1 + (1 | id) + (1 | model:id)
f1 <- correct ~ model + (1 | id) + (1 | model:id)
fits <- function(control) {
  m0 <- glmer(f0, d, family = binomial, control = control); m1 <- glmer(f1, d, family = binomial, control = control)
  a <- anova(m0, m1)
  list(chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2], logLik0 = as.numeric(logLik(m0)),
       logLik1 = as.numeric(logLik(m1)), fixef = as.list(fixef(m1)),
       vcov = setNames(as.list(as.data.frame(VarCorr(m1))$vcov), as.data.frame(VarCorr(m1))$grp))
}
res <- list(converged = fits(tight), default = fits(glmerControl()),
            accuracy = as.list(tapply(d$correct, d$model, mean)))
res$`_produced_by` <- list(script = "tests/reference/harness_glmer.R",
  command = "PYTHONPATH=. .venv/bin/python tests/reference/harness_glmer_data.py && Rscript tests/reference/harness_glmer.R",
  R = R.version.string, lme4 = as.character(packageVersion("lme4")), Matrix = as.character(packageVersion("Matrix")),
  note = paste("Laplace (nAGQ = 1). converged: glmerControl(tolPwrss = 1e-12, optimizer = 'bobyqa',",
               "optCtrl = list(rhoend = 1e-10, maxfun = 1e5)); default: glmerControl()."))
write(toJSON(res, auto_unbox = TRUE, digits = NA, null = "null", na = "null", pretty = TRUE),
      file.path(out, "harness_glmer_lme4.json"))
