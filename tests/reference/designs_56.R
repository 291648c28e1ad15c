# R references of issue 56's designs (tests/book/test_designs_56.py); the data: designs_56_data.py.
#   Rscript tests/reference/designs_56.R tests/reference > tests/reference/designs_56.json
# - hetero5 (5 systems x 3 runs, S0 with 9 times the variance): each pair's Welch t on the run means
#   (stats::t.test, var.equal = FALSE): the statistic and df of the pair's own-SE t (the bootstrap max-|t| that
#   adjusts them is ours);
# - identical (0/1 scores, three identical per-run differences): the paired t's spread is 0; the test against the
#   within-run noise by hand - each system's run x item mean square from lm(score ~ seed + item), the difference of
#   the accuracies over sqrt(sum MS_s / (n I)), Satterthwaite's df - and emmeans' Kenward-Roger contrast of the
#   crossed-runs model (issue 56 quotes p = 0.110);
# - small_sample_three_seeds (2 systems x 3 seeds s0-s2 in both x items): pbkrtest's KRmodcomp of the crossed and
#   of the nested runs model, items random: the two p-values --runs auto now takes the smaller of (adjusted).
suppressPackageStartupMessages({ library(lme4); library(pbkrtest); library(emmeans); library(jsonlite) })
dir <- commandArgs(trailingOnly = TRUE)[1]
rd <- function(name) {
  d <- read.csv(file.path(dir, paste0(name, ".csv.gz")), colClasses = c(system = "character", seed = "character",
                                                                      item = "character"))
  d$system <- factor(d$system); d$seed <- factor(d$seed); d$item <- factor(d$item); d
}
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))
kr <- function(d, random) {
  full <- lme4::lmer(as.formula(paste("score ~ system +", random)), data = d, REML = TRUE, control = ctrl)
  null <- lme4::lmer(as.formula(paste("score ~ 1 +", random)), data = d, REML = TRUE, control = ctrl)
  k <- KRmodcomp(full, null)$test["Ftest", ]
  list(random = random, F = k$stat, num_df = k$ndf, den_df = k$ddf, p_value = k$p.value)
}
out <- list(`_produced_by` = paste("R", getRversion(), "lme4", packageVersion("lme4"), "pbkrtest",
                                   packageVersion("pbkrtest"), "emmeans", packageVersion("emmeans"),
                                   "optimizer bobyqa; tests/reference/designs_56.R"))
h <- rd("hetero5")
m <- aggregate(score ~ system + seed, data = h, FUN = mean)
s <- levels(h$system)
pairs <- list()
for (i in 1:(length(s) - 1)) for (j in (i + 1):length(s)) {
  a <- m$score[m$system == s[i]]; b <- m$score[m$system == s[j]]
  tt <- t.test(a, b, var.equal = FALSE)
  pairs[[paste(s[i], "-", s[j])]] <- list(t = unname(tt$statistic), df = unname(tt$parameter), p_value = tt$p.value)
}
out$hetero5 <- list(welch = pairs)
d <- rd("identical")
I <- nlevels(d$item)
acc <- aggregate(score ~ system + seed, data = d, FUN = mean)
res <- sapply(levels(d$system), function(x) {
  e <- d[d$system == x, ]; e$seed <- droplevels(e$seed)
  fit <- lm(score ~ seed + item, data = e); c(ms = sum(resid(fit)^2) / fit$df.residual, df = fit$df.residual) })
n <- nlevels(d$seed)
V <- sum(res["ms", ]) / (n * I)
nu <- V^2 / sum((res["ms", ] / (n * I))^2 / res["df", ])
delta <- mean(acc$score[acc$system == "S1"]) - mean(acc$score[acc$system == "S0"])
t <- delta / sqrt(V)
crossed <- lme4::lmer(score ~ system + (1|item) + (1|system:item) + (1|seed) + (1|system:seed), data = d,
                      REML = TRUE, control = ctrl)
em <- summary(pairs(emmeans(crossed, ~ system, lmer.df = "kenward-roger")))
out$identical <- list(per_run_differences = acc$score[acc$system == "S1"] - acc$score[acc$system == "S0"],
                      noise = list(F = t^2, den_df = nu, p_value = 2 * pt(-abs(t), nu),
                                   residual_ms = as.list(res["ms", ])),
                      emmeans_kr = list(estimate = em$estimate, df = em$df, p_value = em$p.value))
t3 <- rd("small_sample_three_seeds")
out$three_seeds <- list(crossed = kr(t3, "(1|item) + (1|system:item) + (1|seed) + (1|system:seed)"),
                        nested = kr(t3, "(1|item) + (1|system:item) + (1|system:seed)"))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
