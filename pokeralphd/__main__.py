"""``python -m pokeralphd`` runs the daemon in the foreground."""

from pokeralphd.cli import main

raise SystemExit(main())
