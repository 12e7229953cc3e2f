"""`python -m samsa ...` is the `samsa` command."""

import sys

from samsa.broker.cli import main

sys.exit(main())
