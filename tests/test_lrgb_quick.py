"""`make reproduce-lrgb QUICK=1` (issue 47): a fixed subset of Peptides-func, few epochs,
its own results folder, and every number it writes marked as not the paper's protocol,
the departures beside it; the paper protocol's runs carry no such mark."""

from __future__ import annotations

import json
from pathlib import Path

from swan_jax.experiments import lrgb
from tests.test_first_contact import TINY, make_command
from tests.test_lrgb_experiment import write_peptides


def test_quick_is_a_fixed_peptides_func_subset_of_few_epochs_in_its_own_folder(tmp_path):
    argv = make_command("reproduce-lrgb", tmp_path, "QUICK=1")
    assert argv[:2] == ["--config", "swan_jax/experiments/configs/lrgb-quick.toml"]
    cfg = lrgb.parse_config(argv)
    assert cfg.datasets == ("peptides-func",) and cfg.variants == ("swan", "swan-learn")
    assert cfg.limit == 1000 and cfg.epochs <= 30 and cfg.seeds == (0,)
    assert cfg.results_dir == Path("results/lrgb-quick")
    assert {k: v for k, v in cfg.grid.items()} == dict(lrgb.EXPERIMENT.default_config().grid)
    assert lrgb.EXPERIMENT.departures(cfg) == [
        "only the first 1,000 molecules, split as officially", "15 epoch(s), not 300",
        "1 seed(s), not 3"]
    assert lrgb.EXPERIMENT.departures(lrgb.EXPERIMENT.default_config()) == []
    assert "--all" in make_command("reproduce-lrgb", tmp_path)  # without QUICK: as before


def test_quick_marks_every_number_as_not_the_papers_protocol(tmp_path, capsys):
    data = write_peptides(tmp_path / "data")
    argv = [*make_command("reproduce-lrgb", data, "QUICK=1", "EPOCHS=1"), *TINY,
            "--results-dir", str(tmp_path / "res"), "--cache-dir", str(tmp_path / "cache")]
    departures = lrgb.EXPERIMENT.departures(lrgb.parse_config(argv))
    assert departures[:3] == ["only the first 1,000 molecules, split as officially",
                              "1 epoch(s), not 300", "1 seed(s), not 3"]
    assert departures[3:] == ["batch 4, not 64", "grid num_layers [2], hidden [8]"]  # TINY
    assert lrgb.main(argv) == 0
    table = (tmp_path / "res" / "table.md").read_text()
    assert f"Notes: grid paper; NOT the paper's protocol: {', '.join(departures)}." in table
    [row] = [line for line in table.splitlines() if line.startswith("| peptides-func |")]
    test_value = row.split(" | ")[3]  # the number, then its mark
    assert test_value.endswith(f" (**not the paper's protocol**: {', '.join(departures)})")
    results = json.loads((tmp_path / "res" / "results.json").read_text())
    assert results["protocol"] == {"paper": False, "departures": departures}
