"""`python -m eipctl` is the same as the `eipctl` console script."""

from eipctl.cli.main import main

raise SystemExit(main())
