# pbkrtest 0.5.2 PBmodcomp (parametric-bootstrap LRT) on glmer fits (lme4 1.1-31, Laplace) of a binary and a
# successes-of-trials evaluation log (tests/reference/infer_data.py): correct ~ system + (1|item) + (1|system:seed)
# against ~ 1 + (1|item) + (1|system:seed), 2,000 simulations each, with the counts and moments of the simulated
# reference distribution, for tests/mixed/test_glmm_bootstrap.py (issue 28). PBmodcomp simulates from the null fit and
# refits both models with refit(), which keeps the fits' control: glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa",
# optCtrl = list(rhoend = 1e-10, maxfun = 1e5)) (fits at convergence). `used` is the elapsed seconds of the run.
# Command (from the repository root, after tests/reference/infer_data.py):
#   Rscript tests/reference/glmm_pbmodcomp.R tests/reference > tests/reference/glmm_pbmodcomp.json
suppressMessages({library(lme4); library(pbkrtest); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
rd <- function(f) {
  d <- read.csv(file.path(dir, f))
  for (v in c("system", "seed", "item")) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
  d
}
tight <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
refsummary <- function(pb) list(npos = unname(pb$samples["npos"]), ntot = unname(pb$samples["ntot"]),
                                n_extreme = pb$n.extreme, ref_mean = mean(pb$ref), ref_var = var(pb$ref),
                                ref_quantiles = as.list(setNames(quantile(pb$ref, c(0.5, 0.9, 0.95, 0.99), names = FALSE),
                                                                 c("q50", "q90", "q95", "q99"))))
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   control = "glmerControl(tolPwrss = 1e-12, optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-10, maxfun = 1e5))",
                                   command = "Rscript tests/reference/glmm_pbmodcomp.R tests/reference"))
cases <- list(binary = list("glmm_pb_binary.csv.gz", "correct", 1),
              trials = list("glmm_pb_trials.csv.gz", "cbind(successes, failures)", 2))
for (nm in names(cases)) {
  d <- rd(cases[[nm]][[1]]); resp <- cases[[nm]][[2]]
  f1 <- paste(resp, "~ system + (1|item) + (1|system:seed)"); f0 <- paste(resp, "~ 1 + (1|item) + (1|system:seed)")
  full <- glmer(as.formula(f1), d, family = binomial, control = tight)
  null <- glmer(as.formula(f0), d, family = binomial, control = tight)
  set.seed(cases[[nm]][[3]])
  pb <- PBmodcomp(full, null, nsim = 2000, seed = cases[[nm]][[3]])
  out[[nm]] <- c(list(data = cases[[nm]][[1]], formula_full = f1, formula_null = f0, nsim = 2000,
                      logLik_full = as.numeric(logLik(full)), logLik_null = as.numeric(logLik(null)),
                      LRT = pb$test["LRT", "stat"], df = pb$test["LRT", "df"], p_LRT = pb$test["LRT", "p.value"],
                      p_PBtest = pb$test["PBtest", "p.value"], used = pb$ctime), refsummary(pb))
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
