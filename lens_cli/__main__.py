"""``python -m lens_cli``: the ``lens`` command."""

import sys

from lens_cli.main import console_main

sys.exit(console_main())
