# Kenward-Roger F tests (pbkrtest 0.5.2 KRmodcomp) and Satterthwaite F tests (lmerTest 3.1-3 contest) for explicit
# contrast matrices L on unbalanced designs with random slopes, nested terms and fixed interactions, for
# tests/mixed/test_mixed_kr.py (the balanced and term-wise cases are in small_sample.R).
# Command (from the repository root, after tests/reference/kenward_roger_data.py):
#   Rscript tests/reference/kenward_roger.R tests/reference > tests/reference/kenward_roger_pbkrtest.json
# Writes kr_sleepstudy_unbalanced.csv.gz and kr_machines_unbalanced.csv.gz (deterministic row subsets) beside it.
suppressMessages({library(lmerTest); library(pbkrtest); library(nlme); library(jsonlite)})
dir <- commandArgs(TRUE)[1]
wr <- function(d, f) { gz <- gzfile(file.path(dir, f), "w"); write.csv(d, gz, row.names = FALSE); close(gz) }
data(sleepstudy, package = "lme4")
sleep <- sleepstudy[(seq_len(nrow(sleepstudy)) * 37) %% 11 >= 2, ]  # about 18 % of the rows dropped, unevenly
wr(sleep, "kr_sleepstudy_unbalanced.csv.gz")
data(Machines, package = "nlme")
mach <- as.data.frame(Machines)
mach$Worker <- factor(as.character(mach$Worker)); mach$Machine <- factor(as.character(mach$Machine))
mach <- mach[(seq_len(nrow(mach)) * 13) %% 7 != 0, ]  # about 15 % of the rows dropped
wr(mach, "kr_machines_unbalanced.csv.gz")
slopes <- read.csv(file.path(dir, "kr_slopes.csv.gz"))
for (v in c("system", "seed", "item")) slopes[[v]] <- factor(slopes[[v]])
# each L: rows over the named fixed effects (the others 0)
models <- list(
  sleepstudy_unbalanced = list("Reaction ~ Days + (Days|Subject)", sleep,
    list(Days = list(list(Days = 1)), both = list(list(`(Intercept)` = 1), list(Days = 1)))),
  machines_nested_unbalanced = list("score ~ Machine + (1|Worker/Machine)", mach,
    list(Machine = list(list(MachineB = 1), list(MachineC = 1)), B_vs_C = list(list(MachineB = 1, MachineC = -1)))),
  slopes_interaction = list("score ~ system * len + (1|item) + (1 + len|system:seed)", slopes,
    list(system = list(list(systemb = 1), list(systemc = 1)), len = list(list(len = 1)),
         `system:len` = list(list(`systemb:len` = 1), list(`systemc:len` = 1)),
         mixed = list(list(systemb = 1, `systemb:len` = 0.5), list(systemc = 1, len = -2)))),
  slopes_uncorrelated = list("score ~ system + len + (1|item) + (len||system:seed)", slopes,
    list(system = list(list(systemb = 1), list(systemc = 1)), len = list(list(len = 1))))
)
out <- list(`_produced_by` = list(R = R.version.string, lme4 = as.character(packageVersion("lme4")),
                                   lmerTest = as.character(packageVersion("lmerTest")),
                                   pbkrtest = as.character(packageVersion("pbkrtest")),
                                   command = "Rscript tests/reference/kenward_roger.R tests/reference"),
            models = list())
for (nm in names(models)) {
  f <- models[[nm]][[1]]; d <- models[[nm]][[2]]
  m <- lmer(as.formula(f), data = d, REML = TRUE)
  res <- list(formula = f, nobs = nrow(d), logLik = as.numeric(logLik(m)), fixef = as.list(fixef(m)),
              vcov_adjusted = unname(as.matrix(vcovAdj(m))), tests = list())
  for (tn in names(models[[nm]][[3]])) {
    rows <- models[[nm]][[3]][[tn]]
    L <- t(sapply(rows, function(r) { x <- setNames(numeric(length(fixef(m))), names(fixef(m)))
                                      x[names(r)] <- unlist(r); x }))
    if (length(rows) == 1) L <- matrix(L, nrow = 1, dimnames = list(NULL, names(fixef(m))))
    kr <- KRmodcomp(m, L)$stats
    sat <- contest(m, L, ddf = "Satterthwaite", joint = TRUE)
    res$tests[[tn]] <- list(L = rows,
      KR = list(F = kr$Fstat, F_unscaled = kr$FstatU, scale = kr$F.scaling, NumDF = kr$ndf, DenDF = kr$ddf,
                p = kr$p.value),
      Satterthwaite = list(F = sat[["F value"]], NumDF = sat[["NumDF"]], DenDF = sat[["DenDF"]], p = sat[["Pr(>F)"]]))
  }
  out$models[[nm]] <- res
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE))
