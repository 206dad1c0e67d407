"""Layer 9 (the top, under the face): the ``greenlab`` command, one module per subcommand. May
import any layer below.
"""

from greenlab.cli.app import main  # noqa: F401  the console script greenlab.cli:main
