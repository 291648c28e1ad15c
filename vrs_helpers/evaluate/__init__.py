"""Your own evaluation results (workbook 07, ``vrs analyze``): the book's methods on a score table.

- :mod:`.scores` - read and check a score table or a folder of runs (:func:`~.scores.load_scores`,
  :func:`~.scores.validate`);
- :mod:`.spec` - the analysis specified once and validated once (:class:`~.spec.AnalysisSpec`);
- :mod:`.analysis` - every reading of a table in one call (:func:`~.analysis.analyze`) and ``summary.json``;
- :mod:`.steps` - the named steps ``analyze`` runs (significance, conditional, paired, reliability, verdict, power,
  stochastic order);
- :mod:`.readings` - the numbers NLP users already run (ASO, expected best of n) beside the mixed-model verdict;
- :mod:`.metrics` - several metrics, Holm across them;
- :mod:`.power` - how many runs and items a comparison needs.
"""
