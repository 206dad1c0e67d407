"""``python -m greenlab.course``: runs ``greenlab.course.build`` (build, check, new, run); ``grade``
autograds a class in parallel (``greenlab.course.class_grading``) and ``guide`` writes the
instructor's guide (``greenlab.course.guide``)."""

import runpy
import sys

_OWN = {"grade": "greenlab.course.class_grading", "guide": "greenlab.course.guide"}

if len(sys.argv) > 1 and sys.argv[1] in _OWN:
    import importlib

    sys.exit(importlib.import_module(_OWN[sys.argv[1]]).main(sys.argv[2:]))
runpy.run_module("greenlab.course.build", run_name="__main__", alter_sys=True)
