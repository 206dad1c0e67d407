"""``python -m greenlab.course``: runs ``greenlab.course.build``."""

import runpy

runpy.run_module("greenlab.course.build", run_name="__main__", alter_sys=True)
