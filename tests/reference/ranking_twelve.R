# emmeans 1.8.4 Tukey-adjusted pairwise contrasts of 12 systems on Kenward-Roger df (pbkrtest 0.5.2), and the compact
# letters of multcompView 0.1-8 on those p-values, the simultaneous (adjust = "mvt") intervals of the means (systems in the order of their estimates, best first), for
# tests/evaluate/test_ranking.py (issue 38). Model: the runs-random model of `vrs analyze`,
# score ~ system + (1|item) + (1|system:item) + (1|system:seed), REML at convergence.
# Command (from the repository root, after python tests/reference/ranking_data.py):
#   Rscript tests/reference/ranking_twelve.R tests/reference > tests/reference/ranking_twelve_emmeans.json
suppressMessages({library(lme4); library(pbkrtest); library(emmeans); library(multcompView); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
d <- read.csv(file.path(dir, "ranking_twelve.csv.gz"))
for (v in c("system", "seed", "item")) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
emm_options(lmer.df = "kenward-roger", pbkrtest.limit = 1e5)
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
m <- lmer(score ~ system + (1|item) + (1|system:item) + (1|system:seed), data = d, REML = TRUE, control = ctrl)
e <- emmeans(m, ~ system)
s <- summary(e)
p <- summary(pairs(e, adjust = "tukey"), infer = TRUE)   # with the simultaneous (Tukey) intervals
sim <- as.data.frame(confint(e, adjust = "mvt"))         # simultaneous intervals of the 12 means
ord <- as.character(s$system[order(-s$emmean)])
pm <- matrix(1, 12, 12, dimnames = list(levels(d$system), levels(d$system)))
for (i in seq_len(nrow(p))) { ab <- strsplit(as.character(p$contrast[i]), " - ")[[1]]; pm[ab[1], ab[2]] <- pm[ab[2], ab[1]] <- p$p.value[i] }
l <- multcompLetters(pm[ord, ord] < 0.05)$Letters
frame <- function(x) { x <- as.data.frame(x); lapply(seq_len(nrow(x)), function(i) as.list(x[i, ])) }
cat(toJSON(list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                      pbkrtest = as.character(packageVersion("pbkrtest")),
                                      emmeans = as.character(packageVersion("emmeans")),
                                      multcompView = as.character(packageVersion("multcompView")),
                                      control = "lmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                      command = "Rscript tests/reference/ranking_twelve.R tests/reference"),
                REMLcrit = as.numeric(REMLcrit(m)), emmeans = frame(s), tukey = frame(p), means_mvt = frame(sim),
                order = ord, letters = as.list(l)),
           auto_unbox = TRUE, digits = NA, pretty = TRUE))
