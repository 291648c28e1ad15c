"""vrs_helpers: the tested helper library behind the vrs-workbooks notebooks (Riezler & Hagmann, *Validity,
Reliability, and Significance*).

Modules: ``data`` (registry of the book's real data), ``agreement`` (alpha, pi, kappa), ``formula`` / ``mixed`` /
``marginal`` (linear mixed models without R, GLRTs, marginal means), ``reliability`` (phi, decision studies),
``binary`` (binary scores on the latent scale of a logistic GLMM), ``significance`` (parametric, permutation and
bootstrap tests, GLRT workflows), ``model_based_metrics``,
``validity`` (NLI templates, dataset bias test), ``invariance`` (transformation invariance test), ``gam`` /
``circularity`` (GAMs on sufficient statistics, the circularity test), ``scorecard`` and ``runner`` (reproduction
report, ``vrs`` CLI).
"""

__version__ = "0.1.0"
