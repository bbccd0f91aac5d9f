"""Entry point of ``python -m ovl_runtime`` (see ``cli.py``)."""

import sys

from ._cli.main import main

sys.exit(main())
