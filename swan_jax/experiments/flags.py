"""Command-line flags generated from the settings' declarations (`swan_jax.settings`).

Each setting of an experiment's configuration becomes one flag: `--batch-size` for
`batch_size` (or the declaration's own `flag` and `aliases`), its help text followed by
the default the experiment runs with. Lists are comma-separated (`--seeds 0,1,2`); a
switch `x` is `--x` / `--no-x`; a grid axis takes its values (`--lr 1e-3,5e-4`). The
values go through `swan_jax.settings.check`, the check TOML files go through, so a flag
and a TOML key refuse the same value with the same words.

Why not tyro or simple-parsing: both take space-separated lists (`--seeds 0 1 2`) and
render their own error text and boolean flags, while the README, the Makefile and the
tests use comma-separated values, `--no-...` switches and argparse's one error line;
nested dataclasses would become prefixed flags (`--train.epochs`). Generating argparse
flags from the declarations keeps every existing command line, in about 100 lines.
"""

from __future__ import annotations

import argparse
import types
from collections.abc import Mapping
from typing import Any

from swan_jax.experiments.config import Entry, axes_of, retired_of, schema
from swan_jax.settings import NONE, Retired, SettingError, kind_of, parse_text

AXIS_PREFIX = "axis_"  # argparse dest of a grid axis: "axis_learning_rate"
RETIRED_PREFIX = "retired_"  # argparse dest of a removed setting's (refusing) flag
GROUP_TITLES = {"train": "training", "integrator": "integrator (swan_jax.solvers)",
                "grid": "grid axes (comma-separated values: one run, or one program, each)",
                None: "{label} settings", "io": "output and run control"}


def flag_of(entry: Entry) -> str:
    return entry.spec.flag or "--" + entry.name.replace("_", "-")


def flag_names(cls: type) -> dict[str, str]:
    """Setting (and "grid.<axis>") name -> its flag, for messages."""
    names = {name: flag_of(e) for name, e in schema(cls).items()}
    names.update({f"grid.{name}": flag_of(e) for name, e in axes_of(cls).items()})
    return names


def _shown(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple | list):
        return ",".join(_shown(v) for v in value)
    return str(value)


def _text_parser(entry: Entry, hint: Any):
    """argparse `type=`: text -> checked value, or argparse's error with the problem."""
    def parse(text: str) -> Any:
        try:
            return parse_text(entry.name, text, hint, entry.spec)
        except SettingError as err:
            raise argparse.ArgumentTypeError(err.problem) from None

    parse.__name__ = entry.name  # argparse names the type in some messages
    return parse


def add_flag(group, entry: Entry, default: Any, *, dest: str | None = None) -> None:
    """One setting's flag in an argparse group; unset flags stay None."""
    spec, kind = entry.spec, kind_of(entry.hint)
    names = [flag_of(entry), *spec.aliases]
    dest = dest or entry.name
    # a help that says its own default (an unset path: "default $SWAN_DATA_DIR, else
    # data/") is not followed by argparse's "(default: none)" as well
    text = (spec.help if default is None and "(default " in spec.help
            else f"{spec.help} (default: {_shown(default)})")
    if entry.group == "grid":
        hint = types.GenericAlias(tuple, (kind.item, ...))  # tuple[kind.item, ...]
        group.add_argument(*names, dest=dest, type=_text_parser(entry, hint), default=None,
                           metavar=f"{entry.name.upper()}[,...]", help=text)
    elif kind.item is bool and not kind.many:
        group.add_argument(*names, dest=dest, action=argparse.BooleanOptionalAction,
                           default=None, help=text)
    elif spec.choices and not kind.many:  # argparse's own "invalid choice" line
        group.add_argument(*names, dest=dest, choices=spec.choices, default=None, help=text)
    else:
        many = "[,...]" if kind.many else ""
        group.add_argument(*names, dest=dest, type=_text_parser(entry, entry.hint),
                           default=None, metavar=f"{entry.name.upper()}{many}", help=text)


def add_settings(parser: argparse.ArgumentParser, cls: type, defaults, *, label: str,
                 skip: tuple[str, ...] = ()) -> None:
    """Every setting of `cls` (and its grid axes) as flags, grouped, with the defaults of
    the configuration `defaults`."""
    groups: dict[Any, Any] = {}

    def group(key):
        if key not in groups:
            groups[key] = parser.add_argument_group(GROUP_TITLES[key].format(label=label))
        return groups[key]

    for name, entry in schema(cls).items():
        if name in skip or kind_of(entry.hint).item is Any:
            continue  # the grid and data_options are tables: TOML only
        key = "io" if entry.spec.role == "io" else entry.group
        add_flag(group(key), entry, getattr(defaults, name))
    for name, entry in axes_of(cls).items():
        default = defaults.grid.get(name, "not an axis unless given")
        add_flag(group("grid"), entry, default, dest=AXIS_PREFIX + name)
    for name, old in retired_of(cls).items():  # hidden: refused in one line, if given
        parser.add_argument("--" + name.replace("_", "-"), type=_refused(old),
                            dest=RETIRED_PREFIX + name, help=argparse.SUPPRESS)


def _refused(old: Retired):
    """argparse `type=` of a removed setting's flag: refuses any value with its line."""
    def refuse(text: str) -> Any:
        raise argparse.ArgumentTypeError(f"this flag {old.problem()}")

    return refuse


def given(args: argparse.Namespace, cls: type) -> tuple[dict[str, Any], dict[str, tuple]]:
    """The settings and grid axes a command line gave: (settings, axes)."""
    values = {name: getattr(args, name) for name, entry in schema(cls).items()
              if kind_of(entry.hint).item is not Any and getattr(args, name, None) is not None}
    axes = {name: getattr(args, AXIS_PREFIX + name) for name in axes_of(cls)
            if getattr(args, AXIS_PREFIX + name, None) is not None}
    return values, axes


def names_parser(name: str, choices: tuple[str, ...]):
    """argparse `type=` for comma-separated names out of `choices` (a shortcut flag)."""
    from swan_jax.settings import Setting

    entry = Entry(name, None, tuple[str, ...], Setting(help="", choices=choices), None)
    return _text_parser(entry, entry.hint)


def subject(names: Mapping[str, str], setting: str) -> str:
    """The flag that sets `setting` (or the name itself when no flag does)."""
    return names.get(setting, setting)
