"""The reproduction campaign: every reachable cell of the paper at the paper's protocol,
advanced by every machine that has time, in any order, resumable from git alone.

    python -m reproduce.campaign --budget-minutes 120     # make campaign
    python -m reproduce.campaign status                   # what remains
    python -m reproduce.campaign plan --write             # regenerate the plan

- `plan`: the committed plan file (`reproductions/campaign/plan.toml`): cells, configs,
  costs per device kind, priorities; `defaults` generates it;
- `runner`: one cell's sweep, stopped at a deadline after a checkpoint;
- `bundle`: an unfinished cell's training state as compact `.npz` files for git (parts
  past 4.5 MB each);
- `gather`: finished cells merged into `reproductions/campaign-<group>/`, done cells;
- `costs`, `shapes`: measured seconds per program shape, and a cell priced from them;
- `probe`: a few timed epochs of each unmeasured shape (a GPU slice's first spend);
- `loop`: one call of the campaign (`run_campaign`).
"""

from reproduce.campaign.bundle import BundleError, restore_bundle, write_bundle
from reproduce.campaign.loop import Options, remaining, run_campaign
from reproduce.campaign.plan import Entry, PlanError, load_plan

__all__ = ["BundleError", "Entry", "Options", "PlanError", "load_plan", "remaining",
           "restore_bundle", "run_campaign", "write_bundle"]
