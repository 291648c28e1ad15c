"""The book's methods, one module each (Riezler & Hagmann, *Validity, Reliability, and Significance*).

- validity (chapter 2): :mod:`.validity` (NLI feature templates, the dataset bias test, Definition 2.2),
  :mod:`.invariance` (the transformation invariance test, Definition 2.3), :mod:`.gam` and :mod:`.circularity`
  (GAMs on sufficient statistics, the circularity test, Definition 2.5);
- reliability (chapter 3): :mod:`.agreement` (Krippendorff's alpha, Scott's pi, Cohen's kappa),
  :mod:`.reliability` (variance components, phi, decision studies), :mod:`.binary` (the latent scale of 0/1 scores);
- significance (chapter 4): :mod:`.significance` (z/t, permutation and bootstrap tests, multiple comparisons),
  :mod:`.glrt` (the GLRT of system differences on a mixed model, 4.3), :mod:`.simulation` (type-I error and power by
  simulation), :mod:`.model_based_metrics` (Goyal et al. 2023), :mod:`.stochastic_order` (ASO, expected max);
- :mod:`.data` - the registry of the book's real data.
"""
