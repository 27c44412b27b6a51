"""`python -m fusebridge.cli`: the `fusebridge` command."""

import sys

from fusebridge.cli.command import main

sys.exit(main())
