# lmerTest 3.1-3 (Satterthwaite) and pbkrtest 0.5.2 (Kenward-Roger) F tests of the system effect on the book's MT data
# (data_ter.rds: Marking vs PostEdit, 3 replications each, 1,041 sentences), without and with the system-by-sentence
# term, for tests/mixed/test_mixed_satterthwaite.py (issue 28). The data are not committed: the tests load them through
# the registry (vrs_helpers.book.data.load("mt_ter")).
# Fits at convergence: lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5)).
# Command (from the repository root):
#   Rscript tests/reference/mt_ter.R ../shared/data > tests/reference/mt_ter_lmertest.json
suppressMessages({library(lmerTest); library(pbkrtest); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
d <- readRDS(file.path(dir, "empirical_methods/machine_translation_example/data/data_ter.rds"))
d <- as.data.frame(d)
d <- d[d$system %in% c("Marking", "PostEdit"), ]
d$system <- factor(as.character(d$system), levels = c("Marking", "PostEdit"))
d$sentence_id <- factor(as.character(d$sentence_id))
d$replication <- factor(as.character(d$replication))
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
models <- list(
  without_system_sentence = "ter ~ system + (1|sentence_id) + (1|system:replication)",
  with_system_sentence = "ter ~ system + (1|sentence_id) + (1|system:sentence_id) + (1|system:replication)")
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   lmerTest = as.character(packageVersion("lmerTest")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   control = "lmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                   command = "Rscript tests/reference/mt_ter.R ../shared/data"),
            rows = nrow(d), models = list())
for (nm in names(models)) {
  f <- models[[nm]]
  m <- lmer(as.formula(f), data = d, REML = TRUE, control = ctrl)
  vc <- as.data.frame(VarCorr(m))
  res <- list(formula = f, REMLcrit = as.numeric(REMLcrit(m)), theta = as.list(getME(m, "theta")),
              sigma = sigma(m), varcorr = lapply(seq_len(nrow(vc)), function(i) list(grp = vc$grp[i], vcov = vc$vcov[i])),
              fixef = as.list(fixef(m)), singular = isSingular(m))
  for (ddf in c("Satterthwaite", "Kenward-Roger")) {
    a <- as.data.frame(anova(m, ddf = ddf))
    res[[ddf]] <- list(term = rownames(a)[1], F = a[1, "F value"], NumDF = a[1, "NumDF"], DenDF = a[1, "DenDF"],
                       p = a[1, "Pr(>F)"])
  }
  out$models[[nm]] <- res
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
