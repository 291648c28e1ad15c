# lme4 reference values for tests/evaluate/test_analysis.py (vrs analyze's summary.json contract).
#   Rscript tests/reference/own_analysis.R tests/reference > tests/reference/own_analysis_lme4.json
# Data: own_analysis_data.py (simulated, planted effects). R 4.2.2, lme4 1.1-31, jsonlite.
suppressPackageStartupMessages({ library(lme4); library(jsonlite) })
dir <- commandArgs(trailingOnly = TRUE)[1]
test <- function(f0, f1, d) {
  m0 <- lmer(f0, d, REML = FALSE); m1 <- lmer(f1, d, REML = FALSE)
  a <- anova(m0, m1)
  list(chi2 = a$Chisq[2], df = a$Df[2], p_value = a$`Pr(>Chisq)`[2], loglik0 = as.numeric(logLik(m0)),
       loglik1 = as.numeric(logLik(m1)))
}
vc <- function(f, d) {
  m <- lmer(f, d, REML = TRUE)
  v <- as.data.frame(VarCorr(m))
  setNames(as.list(v$vcov), v$grp)
}
out <- list()
d <- read.csv(file.path(dir, "own_analysis_two.csv.gz"))
d$system <- factor(d$system, levels = c("base", "new")); d$item <- factor(d$item); d$seed <- factor(d$seed)
out$two <- list(
  glrt = test(score ~ 1 + (1|item), score ~ system + (1|item), d),
  glrt_replications_random = test(score ~ 1 + (1|item) + (1|system:seed), score ~ system + (1|item) + (1|system:seed), d),
  conditional = list(
    length = test(score ~ length + (1|item), score ~ system * length + (1|item), d),
    domain = test(score ~ domain + (1|item), score ~ system * domain + (1|item), d)),
  variance_components = list(
    base = vc(score ~ 1 + (1|item) + (1|seed), d[d$system == "base", ]),
    new = vc(score ~ 1 + (1|item) + (1|seed), d[d$system == "new", ])))
t <- read.csv(file.path(dir, "own_analysis_three.csv.gz"), colClasses = c(lr = "character"))
t$system <- factor(t$system); t$item <- factor(t$item)
out$three <- list(
  glrt = test(score ~ 1 + (1|item), score ~ system + (1|item), t),
  glrt_replications_random = test(score ~ 1 + (1|item) + (1|system:seed) + (1|system:lr),
                                   score ~ system + (1|item) + (1|system:seed) + (1|system:lr), t),
  variance_components = lapply(split(t, t$system), function(x) vc(score ~ 1 + (1|item) + (1|seed) + (1|lr), x)))
out$produced_by <- list(command = "Rscript tests/reference/own_analysis.R tests/reference",
                        R = R.version.string, lme4 = as.character(packageVersion("lme4")))
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
