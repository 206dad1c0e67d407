"""``python -m greenlab.cli``: the ``greenlab`` command (``greenlab.cli.app.main``)."""

import sys

from greenlab.cli.app import main

sys.exit(main())
