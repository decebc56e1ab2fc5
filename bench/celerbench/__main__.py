"""`python3 -m celerbench SCENARIO [OPTIONS]`, what bench/run executes."""

import sys

from .driver import main
from .scenarios import SCENARIOS

sys.exit(main(sys.argv[1:], SCENARIOS))
