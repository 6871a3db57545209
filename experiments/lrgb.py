"""The lrgb experiment's command line, kept where the README promises it.

The experiment lives in the package: `python -m swan_jax.experiments.lrgb --help`
(or the `swan-lrgb` console command) is the same program.
"""

import sys

from swan_jax.experiments.lrgb import main

if __name__ == "__main__":
    sys.exit(main())
