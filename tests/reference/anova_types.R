# lmerTest 3.1-3 anova tables of type I, II and III with Satterthwaite's and Kenward-Roger's (pbkrtest 0.5.2)
# denominator df on factorial designs with two- and three-way interactions, each model fitted with treatment AND sum
# contrasts (lmerTest's tables do not depend on the coding), with the type I/II/III hypothesis matrices of the
# treatment-coded fit (attr(table, "hypotheses")), for tests/mixed/test_mixed_anova.py (issue 28).
# Data: lmerTest's ham (Product x Information x Gender, consumers), afex's obk.long (treatment x gender between,
# phase within; unbalanced between-subject cells), afex's md_12.1 (angle x noise within), and a simulated unbalanced
# A x B x C design with a covariate (two- and three-way interactions with it) and without an intercept
# (tests/reference/infer_data.py); the published sets are written out here as
# csv.gz and every model is fitted on the data read back from those files (factor levels sorted as Python sorts).
# Fits at convergence: lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5)).
# Command (from the repository root, after tests/reference/infer_data.py):
#   Rscript tests/reference/anova_types.R tests/reference > tests/reference/anova_types_lmertest.json
suppressMessages({library(lmerTest); library(pbkrtest); library(afex); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
wr <- function(d, f) { gz <- gzfile(file.path(dir, f), "w"); write.csv(d, gz, row.names = FALSE); close(gz) }
data(ham, package = "lmerTest")
wr(as.data.frame(ham)[, c("Consumer", "Product", "Information", "Gender", "Informed.liking")], "anova_ham.csv.gz")
data(obk.long, package = "afex")
wr(as.data.frame(obk.long)[, c("id", "treatment", "gender", "phase", "hour", "value")], "anova_obk_long.csv.gz")
data(md_12.1, package = "afex")
wr(as.data.frame(md_12.1)[, c("id", "angle", "noise", "rt")], "anova_md_12_1.csv.gz")
rd <- function(f, factors) {
  d <- read.csv(file.path(dir, f))
  for (v in factors) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
  d
}
ham <- rd("anova_ham.csv.gz", c("Consumer", "Product", "Information", "Gender"))
obk <- rd("anova_obk_long.csv.gz", c("id", "treatment", "gender", "phase", "hour"))
md <- rd("anova_md_12_1.csv.gz", c("id", "angle", "noise"))
sim <- rd("anova_factorial.csv.gz", c("g", "A", "B", "C"))
models <- list(
  ham = list("Informed.liking ~ Product * Information * Gender + (1|Consumer) + (1|Consumer:Product)", ham,
             "anova_ham.csv.gz"),
  obk_long = list("value ~ treatment * gender * phase + (1|id) + (1|id:phase)", obk, "anova_obk_long.csv.gz"),
  md_12_1 = list("rt ~ angle * noise + (1|id)", md, "anova_md_12_1.csv.gz"),
  sim_three_way = list("y ~ A * B * C + (1|g)", sim, "anova_factorial.csv.gz"),
  sim_covariate = list("y ~ A * B + A * x + (1 + x|g)", sim, "anova_factorial.csv.gz"),
  sim_covariate_three_way = list("y ~ A * x * B + (1|g) + (1|g:A)", sim, "anova_factorial.csv.gz"),
  sim_no_intercept = list("y ~ 0 + A * B + (1|g)", sim, "anova_factorial.csv.gz"))
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
table_of <- function(a) lapply(setNames(rownames(a), rownames(a)), function(r)
  list(F = a[r, "F value"], NumDF = a[r, "NumDF"], DenDF = a[r, "DenDF"], p = a[r, "Pr(>F)"]))
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   lmerTest = as.character(packageVersion("lmerTest")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   afex = as.character(packageVersion("afex")),
                                   control = "lmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                   command = "Rscript tests/reference/anova_types.R tests/reference"),
            models = list())
for (nm in names(models)) {
  f <- models[[nm]][[1]]; d <- models[[nm]][[2]]
  res <- list(formula = f, data = models[[nm]][[3]], rows = nrow(d))
  for (coding in c("contr.treatment", "contr.sum")) {
    options(contrasts = c(coding, "contr.poly"))
    m <- lmer(as.formula(f), data = d, REML = TRUE, control = ctrl)
    key <- if (coding == "contr.treatment") "treatment" else "sum"
    r <- list(REMLcrit = as.numeric(REMLcrit(m)), singular = isSingular(m))
    for (type in 1:3) for (ddf in c("Satterthwaite", "Kenward-Roger")) {
      a <- anova(m, type = type, ddf = ddf)
      r[[paste0("type", type, "_", ddf)]] <- table_of(as.data.frame(a))
      if (coding == "contr.treatment" && ddf == "Satterthwaite")
        r[[paste0("type", type, "_hypotheses")]] <- lapply(attr(a, "hypotheses"), function(L)
          list(rows = rownames(L), cols = colnames(L), values = unname(lapply(seq_len(nrow(L)), function(i) unname(L[i, ])))))
    }
    res[[key]] <- r
  }
  out$models[[nm]] <- res
}
options(contrasts = c("contr.treatment", "contr.poly"))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
