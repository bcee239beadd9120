"""``python -m pokeralphctl``."""

from pokeralphctl.cli import main

raise SystemExit(main())
