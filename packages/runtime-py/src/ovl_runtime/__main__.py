"""Entry point of ``python -m ovl_runtime`` (see ``cli.py``)."""

import sys

from .cli import main

sys.exit(main())
