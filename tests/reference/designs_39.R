# R references of issue 39's designs (tests/book/test_designs_39.py); the data: designs_39_data.py.
#   Rscript tests/reference/designs_39.R tests/reference > tests/reference/designs_39.json
# - shared seeds: the crossed-runs model score ~ system + (1|item) + (1|system:item) + (1|seed) + (1|system:seed)
#   (REML, lme4) tested by pbkrtest's KRmodcomp against the model without system, and lmerTest's Satterthwaite
#   anova; the nested model (without (1|seed)) beside it;
# - unequal variances: Welch's t on the run means (stats::t.test, var.equal = FALSE), and the Welch-Satterthwaite
#   t with the system x item part computed by hand (run_means.py's formula, written anew here);
# - boundary: the REML variance components (lme4) and Student's t on the run means (t.test, var.equal = TRUE),
#   with the system x item part by hand.
suppressPackageStartupMessages({ library(lme4); library(pbkrtest); library(lmerTest); library(jsonlite) })
dir <- commandArgs(trailingOnly = TRUE)[1]
rd <- function(name) {
  d <- read.csv(file.path(dir, paste0(name, ".csv.gz")), colClasses = c(system = "character", seed = "character",
                                                                      item = "character"))
  d$system <- factor(d$system); d$seed <- factor(d$seed); d$item <- factor(d$item); d
}
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(maxfun = 1e5))
vcs <- function(m) { vc <- as.data.frame(VarCorr(m)); setNames(as.list(vc$vcov), vc$grp) }
kr <- function(d, random) {
  full <- lme4::lmer(as.formula(paste("score ~ system +", random)), data = d, REML = TRUE, control = ctrl)
  null <- lme4::lmer(as.formula(paste("score ~ 1 +", random)), data = d, REML = TRUE, control = ctrl)
  k <- KRmodcomp(full, null)$test["Ftest", ]
  lt <- lmerTest::lmer(as.formula(paste("score ~ system +", random)), data = d, REML = TRUE, control = ctrl)
  a <- anova(lt, ddf = "Satterthwaite")
  list(random = random, F = k$stat, num_df = k$ndf, den_df = k$ddf, p_value = k$p.value, variances = vcs(full),
       satterthwaite = list(F = a[["F value"]][1], den_df = a[["DenDF"]][1], p_value = a[["Pr(>F)"]][1]))
}
crossed <- "(1|item) + (1|system:item) + (1|seed) + (1|system:seed)"
nested <- "(1|item) + (1|system:item) + (1|system:seed)"
# the run-means test by hand: d the rows, welch, si (the system x item part)
by_hand <- function(d, welch, si) {
  s <- levels(d$system)
  m <- aggregate(score ~ system + seed, data = d, FUN = mean)
  g <- lapply(s, function(x) m$score[m$system == x]); n <- sapply(g, length); I <- nlevels(d$item)
  v <- sapply(g, var)
  cf <- if (welch) 1 / n else 1 / n[1] + 1 / n[2]
  ms <- if (welch) v else sum((n - 1) * v) / (sum(n) - 2)
  df <- if (welch) n - 1 else sum(n) - 2
  if (si) {
    w <- tapply(d$score, list(d$item, d$system), mean)
    dd <- w[, s[2]] - w[, s[1]]
    res <- sapply(s, function(x) {
      e <- d[d$system == x, ]; e$seed <- droplevels(e$seed)
      fit <- lm(score ~ seed + item, data = e); sum(resid(fit)^2) / fit$df.residual })
    extra_c <- c(1 / I, -1 / (n * I)); extra_ms <- c(var(dd), res); extra_df <- c(I - 1, (n - 1) * (I - 1))
    if (sum(extra_c * extra_ms) > 0) { cf <- c(cf, extra_c); ms <- c(ms, extra_ms); df <- c(df, extra_df) }
  }
  V <- sum(cf * ms); nu <- V^2 / sum((cf * ms)^2 / df)
  t <- (mean(g[[2]]) - mean(g[[1]])) / sqrt(V)
  list(F = t^2, den_df = nu, p_value = 2 * pt(-abs(t), nu), residual_ms = if (si) as.list(setNames(res, s)) else NULL)
}
run_t <- function(d, welch) {
  m <- aggregate(score ~ system + seed, data = d, FUN = mean)
  tt <- t.test(score ~ system, data = m, var.equal = !welch)
  list(F = unname(tt$statistic)^2, den_df = unname(tt$parameter), p_value = tt$p.value)
}
out <- list(`_produced_by` = paste("R", getRversion(), "lme4", packageVersion("lme4"), "pbkrtest",
                                   packageVersion("pbkrtest"), "lmerTest", packageVersion("lmerTest"),
                                   "optimizer bobyqa; tests/reference/designs_39.R"))
s2 <- rd("shared_seeds"); s3 <- rd("shared_seeds3")
out$shared_seeds <- list(crossed = kr(s2, crossed), nested = kr(s2, nested))
out$shared_seeds3 <- list(crossed = kr(s3, crossed), nested = kr(s3, nested))
h <- rd("unequal_variances")
out$unequal_variances <- list(welch_t_test = run_t(h, TRUE), welch_system_item = by_hand(h, TRUE, TRUE),
                              kenward_roger = kr(h, nested))
for (name in c("boundary", "boundary_si")) {
  b <- rd(name)
  out[[name]] <- list(student_t_test = run_t(b, FALSE), student_system_item = by_hand(b, FALSE, TRUE),
                      kenward_roger = kr(b, nested))
}
# the Satterthwaite basis (issue 39, point 5): 3 systems, unbalanced (shared_seeds3 without its first 30 rows of S2
# and every 7th row), the nested model: anova(m) (type III) and contestMD on the dummy columns
u <- s3[-c(which(s3$system == "S2")[1:30], seq(1, nrow(s3), by = 7)), ]
mu <- lmerTest::lmer(as.formula(paste("score ~ system +", nested)), data = u, REML = TRUE, control = ctrl)
a <- anova(mu, ddf = "Satterthwaite")
cm <- contestMD(mu, L = cbind(0, diag(2)), ddf = "Satterthwaite")
out$satterthwaite_basis <- list(dropped = "S2's first 30 rows, then every 7th row (1-based 1, 8, ...)",
  anova = list(F = a[["F value"]][1], den_df = a[["DenDF"]][1], p_value = a[["Pr(>F)"]][1]),
  contestMD_dummies = list(F = cm[["F value"]][1], den_df = cm[["DenDF"]][1]))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
