"""``python -m greenlab.cli``: runs ``greenlab.cli.app``."""

import runpy

runpy.run_module("greenlab.cli.app", run_name="__main__", alter_sys=True)
