"""The node-classification experiment's command line, kept where the README promises it.

The experiment lives in the package: `python -m swan_jax.experiments.node_classification
--help` (or the `swan-node-classification` console command) is the same program.
"""

import sys

from swan_jax.experiments.node_classification import main

if __name__ == "__main__":
    sys.exit(main())
