"""`python -m drt_core.mine`: the mined questions (build.main)."""

import sys

from .build import main

sys.exit(main())
