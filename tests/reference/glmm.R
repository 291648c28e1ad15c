# glmer reference values for tests/mixed/test_mixed_glmm.py.
# Command (from the repository root):
#   .venv/bin/python tests/reference/glmm_data.py && Rscript tests/reference/glmm.R
# Writes tests/reference/glmm_lme4.json and the public R data sets used (cbpp, Contraception, grouseticks) as CSVs.
suppressPackageStartupMessages({library(lme4); library(jsonlite); library(mlmRev)})
out <- "tests/reference"
fitinfo <- function(m, secs = NA) {
  vc <- as.data.frame(VarCorr(m))
  list(logLik = as.numeric(logLik(m)), AIC = AIC(m), BIC = BIC(m), deviance = deviance(m),
       df = attr(logLik(m), "df"), fixef = as.list(fixef(m)), se = as.list(sqrt(diag(as.matrix(vcov(m))))),
       theta = as.list(getME(m, "theta")), varcorr = list(grp = vc$grp, vcov = vc$vcov, sdcor = vc$sdcor),
       ranef = lapply(ranef(m), function(r) setNames(as.list(r[[1]]), rownames(r))), seconds = secs)
}
res <- list()
write.csv(cbpp, gzfile(file.path(out, "glmm_cbpp.csv.gz")), row.names = FALSE)
m <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, family = binomial)
res$cbpp <- fitinfo(m)
mp <- glmer(cbind(incidence, size - incidence) ~ period + (1 | herd), cbpp, family = binomial("probit"))
res$cbpp_probit <- fitinfo(mp)
m0 <- glmer(cbind(incidence, size - incidence) ~ 1 + (1 | herd), cbpp, family = binomial)
res$cbpp_null <- fitinfo(m0)
a <- anova(m0, m)
res$cbpp_lrt <- list(chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2])
# proportions with weights
cb <- transform(cbpp, prop = incidence / size)
mw <- glmer(prop ~ period + (1 | herd), cb, family = binomial, weights = size)
res$cbpp_weights <- fitinfo(mw)

con <- Contraception
write.csv(con, gzfile(file.path(out, "glmm_contraception.csv.gz")), row.names = FALSE)
f <- use ~ age + I(age^2) + urban + livch + (1 | district)
res$contra_laplace <- fitinfo(glmer(f, con, family = binomial))
res$contra_agq9 <- fitinfo(glmer(f, con, family = binomial, nAGQ = 9))
res$contra_nested <- fitinfo(glmer(use ~ age + urban + (1 | district/urban), con, family = binomial))

gt <- grouseticks
write.csv(gt[, c("INDEX", "TICKS", "BROOD", "HEIGHT", "YEAR", "LOCATION")],
          gzfile(file.path(out, "glmm_grouseticks.csv.gz")), row.names = FALSE)
res$grouse <- fitinfo(glmer(TICKS ~ YEAR + (1 | BROOD), gt, family = poisson))
res$grouse_crossed <- fitinfo(glmer(TICKS ~ YEAR + (1 | BROOD) + (1 | LOCATION), gt, family = poisson))

cr <- read.csv(file.path(out, "glmm_crossed.csv.gz"))
fc <- correct ~ condition + (1 | participant) + (1 | item)
secs <- c()
for (i in 1:3) secs[i] <- system.time(mc <- glmer(fc, cr, family = binomial))[["elapsed"]]
res$crossed <- fitinfo(mc, min(secs))
mc0 <- glmer(correct ~ 1 + (1 | participant) + (1 | item), cr, family = binomial)
res$crossed_null <- fitinfo(mc0)
a <- anova(mc0, mc)
res$crossed_lrt <- list(chisq = a$Chisq[2], df = a$Df[2], p = a[["Pr(>Chisq)"]][2])

res$`_produced_by` <- list(script = "tests/reference/glmm.R",
  command = ".venv/bin/python tests/reference/glmm_data.py && Rscript tests/reference/glmm.R",
  R = R.version.string, lme4 = as.character(packageVersion("lme4")),
  Matrix = as.character(packageVersion("Matrix")), mlmRev = as.character(packageVersion("mlmRev")),
  note = "glmer defaults (nAGQ = 1 unless stated); seconds = best of 3 elapsed times of glmer on the crossed design")
write(toJSON(res, auto_unbox = TRUE, digits = NA, null = "null", na = "null", pretty = TRUE),
      file.path(out, "glmm_lme4.json"))
