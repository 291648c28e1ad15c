"""The application: the ``vrs`` command (:mod:`.cli`), notebook runs and grids (:mod:`.runner`), the reproduction
scorecard (:mod:`.scorecard`) and report site (:mod:`.report`), student copies (:mod:`.student`)."""
