"""The transfer experiment's command line, kept where the README promises it.

The experiment lives in the package: `python -m swan_jax.experiments.transfer --help`
(or the `swan-transfer` console command) is the same program.
"""

import sys

from swan_jax.experiments.transfer import main

if __name__ == "__main__":
    sys.exit(main())
