# glmer / lmer reference for issue 55's item analysis (tests/evaluate/test_items.py): the Rasch (1PL) item effects
# of a 0/1 benchmark as conditional modes of a logistic GLMM with models fixed and with models random (crossed
# model and item effects), their conditional SDs (condVar), and the REML variance components of the linear
# G-study model with models as the objects of measurement, items and runs as facets.
# Command (from the repository root):
#   PYTHONPATH=. .venv/bin/python tests/reference/items_rasch_data.py && Rscript tests/reference/items_rasch.R
# Reads tests/reference/items_rasch.csv.gz, writes tests/reference/items_rasch_lme4.json.
suppressPackageStartupMessages({library(lme4); library(jsonlite)})
out <- "tests/reference"
d <- read.csv(file.path(out, "items_rasch.csv.gz"))
d$model <- factor(d$model); d$item <- factor(d$item); d$run <- factor(d$run)
tight <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
modes <- function(m) {
  re <- ranef(m, condVar = TRUE)$item
  list(mode = setNames(as.list(re[, 1]), rownames(re)),
       sd = setNames(as.list(sqrt(attr(re, "postVar")[1, 1, ])), rownames(re)),
       vcov = setNames(as.list(as.data.frame(VarCorr(m))$vcov), as.data.frame(VarCorr(m))$grp),
       fixef = as.list(fixef(m)), logLik = as.numeric(logLik(m)))
}
fixed <- glmer(correct ~ 0 + model + (1 | item), d, family = binomial, control = tight)
crossed <- glmer(correct ~ 1 + (1 | model) + (1 | item), d, family = binomial, control = tight)
g <- lmer(correct ~ 1 + (1 | model) + (1 | item) + (1 | run) + (1 | model:item) + (1 | model:run) + (1 | item:run),
          d, REML = TRUE, control = lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5)))
vc <- as.data.frame(VarCorr(g))
res <- list(fixed = modes(fixed), crossed = modes(crossed),
            gstudy = setNames(as.list(vc$vcov), vc$grp))
res$`_produced_by` <- list(script = "tests/reference/items_rasch.R",
  command = "PYTHONPATH=. .venv/bin/python tests/reference/items_rasch_data.py && Rscript tests/reference/items_rasch.R",
  R = R.version.string, lme4 = as.character(packageVersion("lme4")), Matrix = as.character(packageVersion("Matrix")),
  note = paste("Laplace (nAGQ = 1), glmerControl(tolPwrss = 1e-12, optimizer = 'bobyqa', optCtrl = list(rhoend =",
               "1e-10, maxfun = 1e5)); condVar = TRUE for the conditional SDs; lmer REML with bobyqa (rhoend 1e-10)."))
write(toJSON(res, auto_unbox = TRUE, digits = NA, null = "null", na = "null", pretty = TRUE),
      file.path(out, "items_rasch_lme4.json"))
