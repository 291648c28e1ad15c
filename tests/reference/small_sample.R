# Small-sample F tests of fixed effects (lmerTest 3.1-3: Satterthwaite and Kenward-Roger via pbkrtest 0.5.2) and a
# parametric-bootstrap LRT (pbkrtest::PBmodcomp) for tests/mixed/test_mixed_ddf.py and tests/mixed/test_mixed_bootstrap.py.
# (The PBmodcomp entries record `used`, the elapsed seconds of the run: it changes from run to run.)
# Command (from the repository root, after tests/reference/small_sample_data.py):
#   Rscript tests/reference/small_sample.R tests/reference > tests/reference/small_sample_lmertest.json
suppressMessages({library(lmerTest); library(pbkrtest); library(nlme); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
rd <- function(f, factors) { d <- read.csv(file.path(dir, f)); for (v in factors) d[[v]] <- factor(d[[v]]); d }
three <- rd("small_sample_three_seeds.csv.gz", c("system", "seed", "item"))
unbal <- rd("small_sample_unbalanced.csv.gz", c("system", "seed", "item"))
data(Machines, package = "nlme"); machines <- as.data.frame(Machines)
machines$Worker <- factor(as.character(machines$Worker)); machines$Machine <- factor(as.character(machines$Machine))
gz <- gzfile(file.path(dir, "machines.csv.gz"), "w"); write.csv(machines, gz, row.names = FALSE); close(gz)
data(sleepstudy, package = "lme4")
gz <- gzfile(file.path(dir, "sleepstudy.csv.gz"), "w"); write.csv(sleepstudy, gz, row.names = FALSE); close(gz)
models <- list(
  three_seeds = list("score ~ system + (1|item) + (1|system:seed)", three),
  unbalanced = list("score ~ system + (1|item) + (1|system:seed)", unbal),
  machines = list("score ~ Machine + (1|Worker) + (1|Worker:Machine)", machines),
  sleepstudy_intercept = list("Reaction ~ Days + (1|Subject)", sleepstudy),
  sleepstudy_slopes = list("Reaction ~ Days + (Days|Subject)", sleepstudy)
)
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   lmerTest = as.character(packageVersion("lmerTest")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   command = "Rscript tests/reference/small_sample.R tests/reference"),
            models = list())
for (nm in names(models)) {
  f <- models[[nm]][[1]]; d <- models[[nm]][[2]]
  m <- lmer(as.formula(f), data = d, REML = TRUE)
  res <- list(formula = f, logLik = as.numeric(logLik(m)), fixef = as.list(fixef(m)))
  for (ddf in c("Satterthwaite", "Kenward-Roger")) {
    a <- as.data.frame(anova(m, ddf = ddf))
    res[[ddf]] <- lapply(rownames(a), function(r) list(term = r, F = a[r, "F value"], NumDF = a[r, "NumDF"],
                                                       DenDF = a[r, "DenDF"], p = a[r, "Pr(>F)"]))
    names(res[[ddf]]) <- rownames(a)
  }
  out$models[[nm]] <- res
}
# parametric bootstrap LRT of the system effect in the three-seed log (ML fits, as PBmodcomp refits them)
set.seed(1)
full <- lmer(score ~ system + (1|item) + (1|system:seed), data = three, REML = FALSE)
null <- lmer(score ~ 1 + (1|item) + (1|system:seed), data = three, REML = FALSE)
pb <- PBmodcomp(full, null, nsim = 2000, seed = 1)
out$pbmodcomp <- list(nsim = 2000, LRT = pb$test["LRT", "stat"], p_LRT = pb$test["LRT", "p.value"],
                      p_PBtest = pb$test["PBtest", "p.value"], used = pb$ctime)
# the simulated reference distribution behind p_PBtest (p = (1 + n_extreme) / (1 + npos): PBmodcomp counts the
# simulated LRTs > 0 that exceed the observed one) and its moments and quantiles, for tests/mixed/test_mixed_bootstrap.py
refsummary <- function(pb) list(npos = unname(pb$samples["npos"]), n_extreme = pb$n.extreme,
                                ref_mean = mean(pb$ref), ref_var = var(pb$ref),
                                ref_quantiles = as.list(setNames(quantile(pb$ref, c(0.5, 0.9, 0.95, 0.99), names = FALSE),
                                                                 c("q50", "q90", "q95", "q99"))))
out$pbmodcomp <- c(out$pbmodcomp, refsummary(pb))
# the same on the unbalanced 3-system log (2 df)
set.seed(2)
full <- lmer(score ~ system + (1|item) + (1|system:seed), data = unbal, REML = FALSE)
null <- lmer(score ~ 1 + (1|item) + (1|system:seed), data = unbal, REML = FALSE)
pb <- PBmodcomp(full, null, nsim = 2000, seed = 2)
out$pbmodcomp_unbalanced <- c(list(nsim = 2000, LRT = pb$test["LRT", "stat"], df = pb$test["LRT", "df"],
                                   p_LRT = pb$test["LRT", "p.value"], p_PBtest = pb$test["PBtest", "p.value"],
                                   logLik_null = as.numeric(logLik(null)), logLik_full = as.numeric(logLik(full)),
                                   used = pb$ctime), refsummary(pb))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
