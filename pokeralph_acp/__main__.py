"""``python -m pokeralph_acp``: the same as ``pokeralph-acp``."""

import sys

from pokeralph_acp.cli import main

sys.exit(main())
