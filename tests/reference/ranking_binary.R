# multcomp 1.4 single-step (glht) pairwise contrasts of 12 systems of 0/1 scores, and emmeans' back-transformed
# accuracies (per system, and simultaneous intervals of the means and of the differences in accuracy points,
# emmeans' adjust = "mvt" with regrid), for tests/evaluate/test_ranking.py (issue 38). Model: the runs-random GLMM of `vrs analyze` for 0/1
# scores, score ~ system + (1|item) + (1|system:item) + (1|system:seed), binomial logit, Laplace, at convergence.
# Command (from the repository root, after python tests/reference/ranking_data.py):
#   Rscript tests/reference/ranking_binary.R tests/reference > tests/reference/ranking_binary.json
suppressMessages({library(lme4); library(multcomp); library(emmeans); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
d <- read.csv(file.path(dir, "ranking_binary.csv.gz"))
for (v in c("system", "seed", "item")) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
ctrl <- glmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
m <- glmer(score ~ system + (1|item) + (1|system:item) + (1|system:seed), data = d, family = binomial,
           control = ctrl)
set.seed(38)
g <- glht(m, linfct = mcp(system = "Tukey"))
s <- summary(g, test = adjusted("single-step"))
ci <- confint(g, level = 0.95)
lev <- levels(d$system)
# glht names contrasts "m01 - m00" (later level first); keep them as glht gives them
tab <- data.frame(contrast = names(s$test$coefficients), estimate = unname(s$test$coefficients),
                  SE = unname(s$test$sigma), z = unname(s$test$tstat), p.value = unname(as.numeric(s$test$pvalues)),
                  lower = unname(ci$confint[, "lwr"]), upper = unname(ci$confint[, "upr"]))
crit <- attr(ci$confint, "calpha")
em <- emmeans(m, ~ system)
e <- summary(em, type = "response")
sim <- as.data.frame(confint(em, adjust = "mvt"))   # simultaneous intervals of the 12 means (logit scale)
diffs <- as.data.frame(summary(pairs(regrid(em)), adjust = "mvt", infer = TRUE))  # accuracy points
frame <- function(x) { x <- as.data.frame(x); lapply(seq_len(nrow(x)), function(i) as.list(x[i, ])) }
cat(toJSON(list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                      multcomp = as.character(packageVersion("multcomp")),
                                      mvtnorm = as.character(packageVersion("mvtnorm")),
                                      emmeans = as.character(packageVersion("emmeans")),
                                      control = "glmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                      command = "Rscript tests/reference/ranking_binary.R tests/reference"),
                deviance = as.numeric(deviance(m)), theta = as.numeric(getME(m, "theta")),
                critical_value = as.numeric(crit), glht = frame(tab), emmeans = frame(e),
                means_mvt = frame(sim), differences_mvt = frame(diffs)),
           auto_unbox = TRUE, digits = NA, pretty = TRUE))
