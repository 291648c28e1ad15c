# glmer reference values for binary evaluation data (tests/book/test_binary.py): the GLRTs of compare_systems on the logit
# scale, emmeans contrasts and trends, and the latent-scale variance components of one system.
# Command (from the repository root):
#   .venv/bin/python tests/reference/glmm_eval_data.py && Rscript tests/reference/glmm_eval.R
# Reads tests/reference/glmm_eval.csv.gz, writes tests/reference/glmm_eval_lme4.json.
#
# Every model is fitted twice: with glmer's defaults ("default", timed: best of 3 elapsed seconds) and with the
# PIRLS iterations run to convergence ("converged": tolPwrss = 1e-12 instead of 1e-7, bobyqa in both stages with
# rhoend = 1e-10). On these data the default PIRLS stops early enough to lower the Laplace log-likelihood by up to
# 5e-3 at the same parameters (checked with devFunOnly = TRUE: tolPwrss 1e-7 vs 1e-12; 1e-10 still stops 1e-3 short
# on the model with (1|system:seed); 1e-14 fails with maxstephalfit).
suppressPackageStartupMessages({library(lme4); library(emmeans); library(jsonlite)})
out <- "tests/reference"
d <- read.csv(file.path(out, "glmm_eval.csv.gz"))
d$system <- factor(d$system, levels = c("base", "large", "tuned"))
d$item <- factor(d$item); d$seed <- factor(d$seed); d$domain <- factor(d$domain)
tight <- glmerControl(tolPwrss = 1e-12, optimizer = "bobyqa", optCtrl = list(rhoend = 1e-10, maxfun = 1e5))
timed <- function(f, data) {  # glmer with defaults: best of 3 elapsed times
  secs <- c()
  for (i in 1:3) secs[i] <- system.time(m <- glmer(f, data, family = binomial))[["elapsed"]]
  list(model = m, seconds = min(secs))
}
glrt <- function(f0, f1) {
  a0 <- timed(f0, d); a1 <- timed(f1, d)
  ad <- anova(a0$model, a1$model)
  m0 <- glmer(f0, d, family = binomial, control = tight); m1 <- glmer(f1, d, family = binomial, control = tight)
  a <- anova(m0, m1)
  list(converged = list(chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2],
                        logLik0 = as.numeric(logLik(m0)), logLik1 = as.numeric(logLik(m1)),
                        fixef = as.list(fixef(m1)), vcov = as.data.frame(VarCorr(m1))$vcov),
       default = list(chisq = ad$Chisq[2], logLik0 = as.numeric(logLik(a0$model)),
                      logLik1 = as.numeric(logLik(a1$model)), seconds = a0$seconds + a1$seconds),
       model = m1)
}
contrasts <- function(e) {
  ct <- as.data.frame(e$contrasts)
  ct$contrast <- as.character(ct$contrast)
  if ("domain" %in% names(ct)) ct$domain <- as.character(ct$domain)
  ct[, intersect(names(ct), c("contrast", "domain", "estimate", "SE", "z.ratio", "p.value"))]
}
res <- list()
g <- glrt(correct ~ 1 + (1 | item), correct ~ system + (1 | item))
res$contrasts <- contrasts(emmeans(g$model, pairwise ~ system))          # Tukey, asymptotic z (logit scale)
res$contrasts_holm <- contrasts(emmeans(g$model, pairwise ~ system, adjust = "holm"))
g$model <- NULL; res$overall <- g
g <- glrt(correct ~ 1 + (1 | item) + (1 | system:seed), correct ~ system + (1 | item) + (1 | system:seed))
g$model <- NULL; res$runs_random <- g
g <- glrt(correct ~ domain + (1 | item), correct ~ system * domain + (1 | item))
res$by_domain_contrasts <- contrasts(emmeans(g$model, pairwise ~ system | domain))
g$model <- NULL; res$by_domain <- g
g <- glrt(correct ~ length + (1 | item), correct ~ system * length + (1 | item))
tr <- as.data.frame(emtrends(g$model, ~ system, var = "length"))
res$length_slopes <- list(system = as.character(tr$system), slope = tr$length.trend, SE = tr$SE)
g$model <- NULL; res$by_length <- g

base <- droplevels(d[d$system == "base", ])
fb <- correct ~ 1 + (1 | item) + (1 | seed)
r <- timed(fb, base)
m <- glmer(fb, base, family = binomial, control = tight)
vc <- as.data.frame(VarCorr(m))
res$variance_base <- list(logLik = as.numeric(logLik(m)), grp = vc$grp, vcov = vc$vcov,
                          theta = as.list(getME(m, "theta")), fixef = as.list(fixef(m)),
                          default = list(logLik = as.numeric(logLik(r$model)),
                                         vcov = as.data.frame(VarCorr(r$model))$vcov, seconds = r$seconds))
res$`_produced_by` <- list(script = "tests/reference/glmm_eval.R",
  command = ".venv/bin/python tests/reference/glmm_eval_data.py && Rscript tests/reference/glmm_eval.R",
  R = R.version.string, lme4 = as.character(packageVersion("lme4")),
  emmeans = as.character(packageVersion("emmeans")), Matrix = as.character(packageVersion("Matrix")),
  note = paste("Laplace (nAGQ = 1). converged: glmerControl(tolPwrss = 1e-12, optimizer = 'bobyqa',",
               "optCtrl = list(rhoend = 1e-10, maxfun = 1e5)); default: glmer's defaults, seconds = sum over the",
               "GLRT's two fits of the best of 3 elapsed times. emmeans/emtrends on the converged fits, logit scale,",
               "asymptotic z."))
write(toJSON(res, auto_unbox = TRUE, digits = NA, null = "null", na = "null", pretty = TRUE),
      file.path(out, "glmm_eval_lme4.json"))
