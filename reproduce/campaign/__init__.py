"""The reproduction campaign: the paper's cells, run by their experiments' own commands,
claims first, until a deadline, on any machine; resumable from git alone.

- `cells`: the cells file (`reproductions/campaign/plan.toml`) and a cell's command;
- `loop`: one call (`run_campaign`): cells in priority order until `--until`;
- `carry`: a run folder compressed into parts for git, and back;
- `gather`: finished cells collected into `reproductions/campaign-<group>/`;
- `merge`: a GPU window's run folders taken back.
"""
