"""``python -m privhist``."""

from privhist.cli.main import main

raise SystemExit(main())
