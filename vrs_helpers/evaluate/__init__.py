"""Your own evaluation results (workbook 07, ``vrs analyze``): the book's methods on score tables, harness logs and
judge scores, in three subpackages by role, with the options and the checks they share beside them.

- :mod:`.tables` - a score table or a folder of runs: read and checked (:mod:`.tables.scores`), specified once
  (:mod:`.tables.spec`), analysed by named steps (:mod:`.tables.steps`: significance, conditional, paired,
  reliability, verdict, ranking, power, stochastic order), the readings users already run (:mod:`.tables.readings`),
  several metrics (:mod:`.tables.metrics`), runs and items needed (:mod:`.tables.power`), judge scores corrected with
  human labels (:mod:`.tables.judge`, :mod:`.tables.judged`);
- :mod:`.logs` - harness logs (lm-eval, Inspect, HELM, Every Eval Ever: :mod:`.logs.readers`) analysed task by task
  (:mod:`.logs.tasks`);
- :mod:`.presentation` - the one result (:class:`~.presentation.result.Result`) and its one renderer (HTML,
  Markdown, console; :mod:`.presentation.render`);
- :mod:`.options` (every option declared once), :mod:`.precheck` (the checks before anything heavy),
  :mod:`.files` (bounded reading), :mod:`.analysis` (:func:`~.analysis.analyze`: tables, logs or judge scores in one
  call).
"""
