"""ipywidgets view of a :class:`greenlab.course.quiz.Quiz`; all grading stays in greenlab.course.quiz."""

from __future__ import annotations

import ipywidgets as w

from greenlab.course.quiz import Quiz, grade_question
from greenlab.widgets.common import html_escape


class QuizWidget:
    """One input per question, a Check button each and a Check-all button with the score.

    Driveable from Python: set ``inputs[i].value`` then ``check_buttons[i].click()``
    or ``check_all_button.click()``; read ``feedback[i].value`` and ``score.value``.
    """

    def __init__(self, quiz: Quiz):
        self.quiz = quiz
        self.inputs: list[w.ValueWidget] = []
        self.check_buttons: list[w.Button] = []
        self.feedback: list[w.HTML] = []
        boxes = []
        for i, q in enumerate(quiz.questions):
            control = _input_for(q)
            button = w.Button(description="Check", layout=w.Layout(width="90px"))
            out = w.HTML("")
            button.on_click(lambda _b, i=i: self.check(i))
            self.inputs.append(control)
            self.check_buttons.append(button)
            self.feedback.append(out)
            prompt = w.HTML(f"<b>Q{i + 1}.</b> {html_escape(q.prompt)}")
            boxes.append(w.VBox([prompt, control, w.HBox([button, out])]))
        self.check_all_button = w.Button(description="Check all", button_style="info")
        self.score = w.HTML("")
        self.check_all_button.on_click(lambda _b: self.check_all())
        header = [w.HTML(f"<h4>{html_escape(quiz.title)}</h4>")] if quiz.title else []
        self.widget = w.VBox(header + boxes + [w.HBox([self.check_all_button, self.score])])
        self.widget.add_class("greenlab-quiz")

    def answers(self) -> list:
        """The current answers in the form :meth:`Quiz.grade` accepts."""
        return [_answer_from(q, c) for q, c in zip(self.quiz.questions, self.inputs)]

    def check(self, i: int):
        """Grade question ``i`` and show its feedback; returns the QuestionResult."""
        try:
            result = grade_question(self.quiz.questions[i], self.answers()[i], index=i)
        except ValueError as err:  # e.g. text where a number is needed
            self.feedback[i].value = f"<span style='color:#b42318'>{html_escape(err)}</span>"
            return None
        self.feedback[i].value = _feedback_html(result)
        return result

    def check_all(self):
        """Grade every question, show all feedback and the score; returns the GradeResult."""
        try:
            graded = self.quiz.grade(self.answers())
        except ValueError as err:
            self.score.value = f"<span style='color:#b42318'>{html_escape(err)}</span>"
            return None
        for r in graded.results:
            self.feedback[r.index].value = _feedback_html(r)
        self.score.value = f"<b>Score: {graded.score}/{graded.total}</b>"
        return graded

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def _input_for(q):
    labels = [o.text for o in q.options]
    if q.kind == "single":
        return w.RadioButtons(options=labels, value=None, layout=w.Layout(width="auto"))
    if q.kind == "multiple":
        return w.VBox([w.Checkbox(value=False, description=t, indent=False) for t in labels])
    return w.Text(value="", placeholder=f"a number{' in ' + q.unit if q.unit else ''}")


def _answer_from(q, control):
    if q.kind == "single":
        return control.value  # option text or None
    if q.kind == "multiple":
        return [j for j, box in enumerate(control.children) if box.value]
    text = control.value.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return text  # graded as a clear "needs a number" message below


def _feedback_html(result) -> str:
    colour = "#1a7f37" if result.correct else "#b42318"
    mark = "Correct." if result.correct else ("Not answered." if not result.answered else "Not quite.")
    lines = [html_escape(f) for f in result.feedback if f != "Not answered."]
    return f"<span style='color:{colour}'><b>{mark}</b> {' '.join(lines)}</span>"
