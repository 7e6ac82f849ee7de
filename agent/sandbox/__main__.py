"""`python -m agent.sandbox --write DIR … -- CMD`: run CMD confined (agent.sandbox.landlock)."""

import sys

from agent.sandbox.landlock import main

raise SystemExit(main(sys.argv[1:]))
