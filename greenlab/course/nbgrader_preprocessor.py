"""nbgrader preprocessor that releases each solution cell as the course's learner copy of it.

nbgrader's ``ClearSolutions`` replaces a solution region with one fixed stub for every exercise;
the course's exercises each have their own learner part (``return None``, ``x = None``, ...), so
that a released notebook runs top to bottom. This preprocessor runs right after ``ClearSolutions``
(``greenlab.course.nbgrader`` writes the config that says so) and sets each solution cell's source
to the learner text that the export stored in the cell's ``greenlab.learner_source`` metadata,
then drops that metadata. Imported only by nbgrader's config: it needs nbgrader.
"""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests, NbGraderPreprocessor
from traitlets import List


class LearnerParts(NbGraderPreprocessor):
    """Give every solution cell that carries ``greenlab.learner_source`` that text."""

    def preprocess_cell(self, cell, resources, index):
        meta = cell.metadata.get("greenlab", {})
        if "learner_source" in meta:
            cell.source = meta["learner_source"]
            del cell.metadata["greenlab"]
        return cell, resources


class HideHiddenTests(ClearHiddenTests):
    """nbgrader's ``ClearHiddenTests`` for the feedback: a learner sees each hidden test's verdict (its
    output), not its code. The HTML exporter configures ``display_data_priority`` on every
    preprocessor, which nbgrader's own class does not declare configurable (a warning on every
    ``generate_feedback``); here it is."""

    display_data_priority = List(NbGraderPreprocessor.display_data_priority.default_value).tag(config=True)
