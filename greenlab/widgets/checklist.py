"""The scale-out checklist: a view over :func:`greenlab.impact.scaling.recommend`.

One dropdown per question of :data:`greenlab.impact.scaling.SCALE_OUT_QUESTIONS`; the recommendation
and its reasons update whenever an answer changes. The scoring lives in ``scaling``.
"""

from __future__ import annotations

from typing import Mapping

from greenlab.impact import scaling
from greenlab.widgets.common import html_escape, resolve_display


class ScaleOutChecklist:
    """Answer the questions to ask before going distributed; read the recommendation.

    ``answers`` presets some or all answers (question key -> option); the rest start at each
    question's first option. Driveable from Python: set ``dropdowns[key].value`` and read
    :meth:`recommendation`. Without a front end, displaying it prints the questions and the
    recommendation for the current answers.
    """

    def __init__(self, answers: Mapping[str, str] | None = None, display: str = "auto"):
        self.mode = resolve_display(display)
        start = {q.key: next(iter(q.options)) for q in scaling.SCALE_OUT_QUESTIONS}
        for key, value in dict(answers or {}).items():
            if key not in start:
                raise ValueError(f"unknown question key {key!r}; expected one of {sorted(start)}")
            start[key] = value
        scaling.recommend(start)  # a bad preset answer raises here, with the allowed options
        self._answers = start
        self.dropdowns = {}
        if self.mode == "widget":
            self._build_widgets()

    def answers(self) -> dict[str, str]:
        """The current answers, question key -> option."""
        if self.dropdowns:
            return {key: box.value for key, box in self.dropdowns.items()}
        return dict(self._answers)

    def recommendation(self) -> scaling.Recommendation:
        return scaling.recommend(self.answers())

    def text(self) -> str:
        """Questions, chosen answers and the recommendation as plain text."""
        answers = self.answers()
        lines = [f"- {q.text}  -> {answers[q.key]}" for q in scaling.SCALE_OUT_QUESTIONS]
        return "\n".join(lines + ["", self.recommendation().text])

    def update(self, *_) -> None:
        rec = self.recommendation()
        items = "".join(f"<li>{html_escape(r)}</li>" for r in rec.reasons)
        self.result.value = (f"<b>Recommendation: {html_escape(rec.decision)}</b> "
                             f"(score {rec.score:+d})<ul>{items}</ul>")

    def _build_widgets(self) -> None:
        import ipywidgets as w

        for q in scaling.SCALE_OUT_QUESTIONS:
            box = w.Dropdown(options=list(q.options), value=self._answers[q.key],
                             layout=w.Layout(width="260px"))
            box.observe(self.update, names="value")
            self.dropdowns[q.key] = box
        rows = [w.HBox([w.HTML(html_escape(q.text), layout=w.Layout(width="520px")),
                        self.dropdowns[q.key]]) for q in scaling.SCALE_OUT_QUESTIONS]
        self.result = w.HTML()
        self.widget = w.VBox(rows + [self.result])
        self.update()

    def _ipython_display_(self):
        if self.mode == "widget":
            from IPython.display import display

            display(self.widget)
        else:
            print(self.text())
