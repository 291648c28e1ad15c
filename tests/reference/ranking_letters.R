# Reference for tests/evaluate/test_ranking.py::test_letters_equal_multcompview (issue 38): the compact letter display
# of R's multcompView::multcompLetters on random decision matrices of 3-12 systems.
#   Rscript tests/reference/ranking_letters.R > tests/reference/ranking_letters.json
# (R 4.2.2, multcompView 0.1-8, jsonlite; Debian bookworm: apt-get install r-cran-multcompview r-cran-jsonlite)
library(multcompView)
set.seed(38)
cases <- list()
for (case in 1:40) {
  k <- sample(3:12, 1)
  names <- paste0("s", seq_len(k))
  p <- runif(1, 0.1, 0.9)                      # share of separated pairs
  d <- matrix(FALSE, k, k, dimnames = list(names, names))
  d[lower.tri(d)] <- runif(k * (k - 1) / 2) < p
  d <- d | t(d)
  l <- multcompLetters(d)$Letters
  cases[[case]] <- list(names = names, differ = unname(d), letters = unname(l[names]))
}
cat(jsonlite::toJSON(list(command = "Rscript tests/reference/ranking_letters.R",
                          multcompView = as.character(packageVersion("multcompView")),
                          R = R.version.string, cases = cases), auto_unbox = TRUE, pretty = FALSE))
