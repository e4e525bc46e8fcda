"""``python -m calibkit.cli``: the ``calibkit`` command."""

import sys

from calibkit.cli import main

sys.exit(main())
