"""``python -m lklab.cli``: the ``lklab`` command."""

import sys

from lklab.cli import main

sys.exit(main())
