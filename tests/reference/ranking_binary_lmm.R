# emmeans Tukey-adjusted pairwise contrasts on Kenward-Roger df (pbkrtest) of the linear mixed model of 12 systems'
# 0/1 scores - the default runs-random reading of `vrs analyze` for 0/1 scores with more than 5 systems (issue 38):
# score ~ system + (1|item) + (1|system:item) + (1|seed) + (1|system:seed) (the seed labels are shared by the systems:
# runs crossed, vrs analyze's --runs auto), REML at convergence, on tests/reference/ranking_binary.csv.gz; and the
# compact letters of multcompView on those p-values. For tests/evaluate/test_ranking.py.
# Command (from the repository root):
#   Rscript tests/reference/ranking_binary_lmm.R tests/reference > tests/reference/ranking_binary_lmm.json
suppressMessages({library(lme4); library(pbkrtest); library(emmeans); library(multcompView); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
d <- read.csv(file.path(dir, "ranking_binary.csv.gz"))
for (v in c("system", "seed", "item")) { x <- as.character(d[[v]]); d[[v]] <- factor(x, levels = sort(unique(x), method = "radix")) }
emm_options(lmer.df = "kenward-roger", pbkrtest.limit = 1e5)
ctrl <- lmerControl(optimizer = "bobyqa", optCtrl = list(rhoend = 1e-12, maxfun = 1e5))
m <- lmer(score ~ system + (1|item) + (1|system:item) + (1|seed) + (1|system:seed), data = d, REML = TRUE,
          control = ctrl)
e <- emmeans(m, ~ system)
s <- summary(e)
p <- summary(pairs(e, adjust = "tukey"), infer = TRUE)
ord <- as.character(s$system[order(-s$emmean)])
k <- nlevels(d$system)
pm <- matrix(1, k, k, dimnames = list(levels(d$system), levels(d$system)))
for (i in seq_len(nrow(p))) { ab <- strsplit(as.character(p$contrast[i]), " - ")[[1]]; pm[ab[1], ab[2]] <- pm[ab[2], ab[1]] <- p$p.value[i] }
l <- multcompLetters(pm[ord, ord] < 0.05)$Letters
kr <- KRmodcomp(m, update(m, . ~ . - system))
frame <- function(x) { x <- as.data.frame(x); lapply(seq_len(nrow(x)), function(i) as.list(x[i, ])) }
cat(toJSON(list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                      pbkrtest = as.character(packageVersion("pbkrtest")),
                                      emmeans = as.character(packageVersion("emmeans")),
                                      multcompView = as.character(packageVersion("multcompView")),
                                      control = "lmerControl(optimizer = 'bobyqa', optCtrl = list(rhoend = 1e-12, maxfun = 1e5))",
                                      command = "Rscript tests/reference/ranking_binary_lmm.R tests/reference"),
                REMLcrit = as.numeric(REMLcrit(m)), variances = as.data.frame(VarCorr(m))[, c("grp", "vcov")],
                kenward_roger = list(F = kr$test["Ftest", "stat"], num_df = kr$test["Ftest", "ndf"],
                                     den_df = kr$test["Ftest", "ddf"], p_value = kr$test["Ftest", "p.value"]),
                emmeans = frame(s), tukey = frame(p), order = ord, letters = as.list(l)),
           auto_unbox = TRUE, digits = NA, pretty = TRUE))
