"""The graphprop experiment's command line, kept where the README promises it.

The experiment lives in the package: `python -m swan_jax.experiments.graphprop --help`
(or the `swan-graphprop` console command) is the same program.
"""

import sys

from swan_jax.experiments.graphprop import main

if __name__ == "__main__":
    sys.exit(main())
