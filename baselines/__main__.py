"""``python -m baselines`` is ``python -m baselines.train``."""

import sys

from baselines.train import main

main(sys.argv[1:])
