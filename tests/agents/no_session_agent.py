"""An agent for `leanrig run` tests that never opens a session: it exits at once (its
submission is the task's initial file, which is rejected)."""

import sys

sys.exit(0)
