"""A setting is declared once: a dataclass field whose metadata says what it means.

`setting(default, help=..., low=1, ...)` is `dataclasses.field` carrying a `Setting`:
its help text, its range or choices, whether it can be a grid axis (a list of values,
one run or program each; `traced`: one program for all of them) and its role (does it
decide the numbers, choose what runs, say where things go, or is it set by the code that
trains). `check(name, value, hint, spec)` is the one validation of a value, whatever its
source (a TOML scalar, a `[grid]` list, a command-line flag, a default); it raises
`SettingError`, which carries the setting, the value and what is wrong, and names no
command-line flag (the command layer does that). A model's configuration (`SWANConfig`)
checks its keywords from the same declarations (`check_keywords`: a traced value may be
a tracer) and declares its grid axes to every grid (`grid_source`): `train` checks a
grid against them and turns a traced choice's names into their codes (`traced_value`)
without importing the model. Any other library error that a setting fixes is a
`HintedError`: its `Hint`s name the setting and the value that helps (`resume=True`),
which a command line spells as its flag (`--resume`).

    @dataclasses.dataclass(frozen=True)
    class Options:
        epochs: int = setting(100, help="training epochs", low=1)

    check("epochs", 0, int, spec_of(dataclasses.fields(Options)[0]))
    # SettingError: epochs must be >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import numbers
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROLES = ("train", "select", "io", "internal", "grid")
NONE = "none"  # TOML has no null: "none" stands for None


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a setting means and accepts (the metadata of its field).

    Attributes:
      help: one sentence for `--help` and the documentation.
      choices: the valid names of a str setting (or of each item of a list of names).
      low, high: the range of a number (or of each item); `low_open` / `high_open`
        exclude the bound itself (`low=0, low_open=True`: > 0).
      distinct: the items of a list must differ (seeds).
      parts: the names of the items of a fixed-length tuple (train, val, test sizes).
      grid: a value can be a grid axis: a list of values, one run or program each.
      role: "train" (decides the numbers: part of a program's identity), "select"
        (chooses which cells run), "io" (where or how, not what), "internal" (set by
        the code that calls, not a user setting), "grid" (the grid itself).
      flag, aliases: the command-line spelling when it is not `--name-with-dashes`.
      since_default: a setting added after results existed: it enters a program's
        identity only when it differs from its default (old folders keep their names).
      traced: a grid axis whose values train in ONE compiled program, a traced number
        per run (a leaf of the configuration's pytree); without it an axis is static
        (one program per value: it changes shapes or code paths).
      codes: a traced choice's numbers, one per name of `choices` (`adjacency`: sym 1,
        adj 0): its one form below the configuration (`traced_value`), known or traced.
    """

    help: str
    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    distinct: bool = False
    parts: tuple[str, ...] | None = None
    grid: bool = False
    role: str = "train"
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    since_default: bool = False
    traced: bool = False
    codes: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"role {self.role!r}; valid: {', '.join(ROLES)}")
        if self.traced and not self.grid:
            raise ValueError("a traced setting is a grid axis: declare it grid=True")
        if self.traced and self.choices is not None and self.codes is None:
            raise ValueError("a traced choice needs its codes (one number per choice)")
        if self.codes is not None and not (self.traced and self.choices is not None
                                           and len(self.codes) == len(self.choices)):
            raise ValueError("codes are a traced choice's: one number per choice, "
                             "with traced=True")

    def range_text(self) -> str:
        """'> 0', '>= 1', 'in (0, 1)', or '' without a range."""
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return ""

    def in_range(self, value: float) -> bool:
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open
                                        else value <= self.high)
        return low_ok and high_ok


def setting(default: Any = dataclasses.MISSING, *, help: str, default_factory: Any = None,
            compare: bool = True, **spec: Any) -> Any:
    """A dataclass field declared with its `Setting` (the keywords besides `help`)."""
    metadata = {"setting": Setting(help=help, **spec)}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata,
                                 compare=compare)
    return dataclasses.field(default=default, metadata=metadata, compare=compare)


def spec_of(field: dataclasses.Field[Any]) -> Setting | None:
    return field.metadata.get("setting")


@dataclasses.dataclass(frozen=True)
class Retired:
    """A setting that was removed, declared on its class's `RETIRED` mapping (name ->
    `Retired`): its last default, which a configuration file written before may hold
    and which then reads as before (it changed nothing), and `instead`, what does its
    work now (or that nothing needs to): the one line that refuses any other value."""

    default: Any
    instead: str

    def problem(self) -> str:
        return f"is removed: {self.instead}"


def retired(cls: type) -> dict[str, Retired]:
    """The removed settings a class declares (`cls.RETIRED`; none without it)."""
    return dict(getattr(cls, "RETIRED", {}))


class SettingError(ValueError):
    """A value a setting does not accept.

    Attributes: `setting` (its name), `value` (as given), `problem` (what is wrong,
    phrased to follow the setting's name: "must be >= 1, got 0"), `where` (the source
    that gave it, e.g. a TOML file, or None).
    """

    def __init__(self, setting: str, problem: str, value: Any = None, *,
                 where: str | None = None) -> None:
        self.setting, self.problem, self.value, self.where = setting, problem, value, where
        super().__init__(self.line())

    def __str__(self) -> str:  # `where` may be set after the error is raised
        return self.line()

    def line(self, subject: str | None = None) -> str:
        """One line: `subject` (default: the setting's name) and the problem."""
        subject = subject or self.setting
        names_itself = self.setting and self.problem.startswith(f"{self.setting} ")
        text = join(subject, self.problem) if subject and not names_itself else self.problem
        return f"{self.where}: {text}" if self.where else text


# How a setting set to a value is written in advice: (setting, value or None) -> text, or
# None when the reader has no way to set it (then the library's keyword is written).
Spelling = Callable[[str, Any], "str | None"]
HINT = "{hint}"  # where a message places a hint's sentence


def keyword(setting: str, value: Any = None) -> str:
    """The library's spelling: `skip_bad_rows=True` (a setting and its value), or the
    setting's name alone (`hidden`) when no value is suggested."""
    return setting if value is None else f"{setting}={value!r}"


@dataclasses.dataclass(frozen=True)
class Hint:
    """What changes an error's outcome: set `setting` to `value` (None: the setting alone).

    `text` is the sentence, with `{switch}` where the setting is named: "pass {switch} to
    skip such rows" reads "pass skip_bad_rows=True to skip such rows" from the library
    and "pass --skip-bad-rows to skip such rows" from a command line.
    """

    setting: str
    value: Any
    text: str = "{switch}"

    @property
    def switch(self) -> str:
        return keyword(self.setting, self.value)

    def render(self, spell: Spelling = keyword) -> str:
        word = spell(self.setting, self.value) or self.switch
        return self.text.replace("{switch}", word)


class HintedError(Exception):
    """An error whose message names settings only through `Hint`s, never as flags.

    `template` holds `HINT` (`"{hint}"`) where each hint's sentence goes, in order; a
    hint without a place follows the message in parentheses. `str(err)` writes the
    settings the library's way (`resume=True`); a command line renders the same error
    with `err.render(spell)`, `spell(setting, value)` giving its flag (`--resume`).
    """

    def __init__(self, message: str, *hints: Hint | None) -> None:
        self.template = message
        self.hints = tuple(h for h in hints if h is not None)
        super().__init__(self.render())

    def __str__(self) -> str:
        return self.render()

    @property
    def settings(self) -> tuple[str, ...]:
        """The settings the hints name, in order."""
        return tuple(h.setting for h in self.hints)

    def render(self, spell: Spelling = keyword) -> str:
        """The message, each hint's setting written by `spell` (a command line: its flag)."""
        texts = [h.render(spell) for h in self.hints]
        parts = self.template.split(HINT, len(texts))
        # fewer places than hints: the rest follow in parentheses
        out = parts[0] + "".join(text + part
                                 for text, part in zip(texts, parts[1:], strict=False))
        return out + "".join(f" ({text})" for text in texts[len(parts) - 1:])


def did_you_mean(value: Any, valid: typing.Iterable[str]) -> str:
    """"; did you mean 'adam'?" for the nearest valid name of a typo, else ""."""
    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, list(valid), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_name(what: str, value: Any, valid: typing.Iterable[str]) -> str:
    """"unknown optimizer 'adm'; valid: adam, adamw; did you mean 'adam'?"."""
    valid = list(valid)
    return f"unknown {what} {value!r}; valid: {', '.join(valid)}{did_you_mean(value, valid)}"


def join(subject: str, problem: str) -> str:
    """'epochs must be >= 1, got 0'; 'seeds: expected at least one value, ...'."""
    predicate = problem.startswith(("must ", "takes ", "cannot ", "is "))
    return f"{subject} {problem}" if predicate else f"{subject}: {problem}"


# ------------------------------------------------------------------------ types


@dataclasses.dataclass(frozen=True)
class Kind:
    """A field's type, read from its annotation: the item type, list-ness, None-ability."""

    item: Any  # int, float, str, bool, Path, or Any (a mapping, passed through)
    many: bool = False  # a tuple of items
    length: int | None = None  # a fixed-length tuple
    optional: bool = False


def kind_of(hint: Any) -> Kind:
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return dataclasses.replace(kind_of(inner[0]), optional=type(None) in args)
    if (typing.get_origin(hint) or hint) is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return Kind(args[0], many=True)
        return Kind(args[0] if args else Any, many=True, length=len(args) or None)
    return Kind(hint if hint in (int, float, str, bool, Path) else Any)


def _number_text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _scalar(name: str, kind: Kind, spec: Setting, value: Any, shown: str) -> Any:
    """One value of `kind.item`, checked (SettingError otherwise)."""
    item = kind.item
    problem = None
    if item is bool:
        if not isinstance(value, bool):
            problem = f"must be true or false, got {shown}"
    elif item is int and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        problem = f"must be an integer, got {shown}"
    elif item is float and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        problem = f"must be a number, got {shown}"
    elif item is float and not math.isfinite(value):
        rng = spec.range_text()
        problem = f"must be a finite number{' ' + rng if rng else ''}, got {shown}"
    elif item in (int, float) and not spec.in_range(value):
        problem = (f"must be {'a finite number ' if item is float else ''}"
                   f"{spec.range_text()}, got {shown}")
    elif item is str and not isinstance(value, str):
        problem = f"must be a string, got {shown}"
    elif item is Path and not isinstance(value, str | Path):
        problem = f"must be a path, got {shown}"
    elif item is Path and isinstance(value, str) and not value.strip():
        # Path("") is Path("."): an empty value would silently mean the current folder
        problem = "must be a path, got an empty one (give a folder, e.g. '.' for this one)"
    elif spec.choices is not None and value not in spec.choices:
        # argparse's own words, so that a flag and a TOML value read the same
        problem = (f"invalid choice: {value!r} (choose from "
                   f"{', '.join(map(repr, spec.choices))})")
    if problem is not None:
        raise SettingError(name, problem, value)
    return {int: int, float: float, Path: Path}.get(item, lambda v: v)(value)


def check(name: str, value: Any, hint: Any, spec: Setting, *, text: str | None = None
          ) -> Any:
    """`value` as the setting's type (lists -> tuples, ints -> floats, "none" -> None),
    or `SettingError`. `text`: what the user typed, quoted in the messages."""
    kind = kind_of(hint)
    if value is None or (kind.optional and value == NONE):
        if kind.optional:
            return None
        raise SettingError(name, f"must be set (it has no {NONE!r})", value)
    if kind.item is Any:
        return value
    if kind.many:
        return check_items(name, value, kind, spec, text=text)
    return _scalar(name, kind, spec, value, text if text is not None else repr(value))


def check_items(name: str, value: Any, kind: Kind, spec: Setting, *,
                text: str | None = None, length: bool = True) -> tuple[Any, ...]:
    """A list setting (or grid axis): every item checked; the flag's phrasing.
    `length=False`: leave a fixed length to the configuration's check."""
    where = f" in {text!r}" if text is not None else ""
    if not isinstance(value, list | tuple):
        raise SettingError(name, f"must be a list, got {value!r}", value)
    if not value:
        what = "name" if spec.choices else "value"
        valid = f"; valid: {', '.join(spec.choices)}" if spec.choices else ""
        raise SettingError(name, f"expected at least one {what}, got an empty list{valid}",
                           value)
    if spec.choices is not None:
        bad = [v for v in value if v not in spec.choices]
        if bad:
            raise SettingError(name, f"unknown {', '.join(map(repr, bad))}; valid: "
                                     f"{', '.join(spec.choices)}", value)
        out = tuple(value)
    else:
        out = tuple(_list_item(name, v, kind, spec, where, value) for v in value)
    if spec.distinct:
        repeated = sorted({v for v in out if out.count(v) > 1})
        if repeated:
            raise SettingError(name, f"{name} must be distinct, {repeated[0]} is repeated"
                                     f"{where}", value)
    if length and kind.length is not None and len(out) != kind.length:
        parts = ",".join(spec.parts or ())
        count = {2: "two", 3: "three"}.get(kind.length, str(kind.length))
        raise SettingError(name, f"takes {count} numbers: {parts} (got {len(out)})", value)
    return out


def _list_item(name: str, value: Any, kind: Kind, spec: Setting, where: str, whole: Any
               ) -> Any:
    item = kind.item
    if item in (int, float) and (isinstance(value, bool)
                                 or not isinstance(value, numbers.Real)
                                 or (item is int and not isinstance(value, numbers.Integral))):
        noun = "integers" if item is int else "numbers"
        raise SettingError(name, f"expected {noun}, got {value!r}", whole)
    if item is float:
        value = float(value)
        if not math.isfinite(value):
            raise SettingError(name, f"expected finite numbers, got {value}{where}", whole)
    if item in (int, float) and not spec.in_range(value):
        raise SettingError(name, f"every value must be {spec.range_text()}, got "
                                 f"{_number_text(value)}{where}", whole)
    if item in (str, Path) and not isinstance(value, str):
        raise SettingError(name, f"expected names, got {value!r}", whole)
    return int(value) if item is int else value


def parse_text(name: str, text: str, hint: Any, spec: Setting) -> Any:
    """A command-line value -> the setting's value (comma-separated lists), checked."""
    kind = kind_of(hint)
    if kind.optional and text.strip().lower() == NONE:
        return None
    if kind.item is bool:
        raise SettingError(name, "is a switch: it takes no value", text)
    if not kind.many:
        return check(name, _word(text, kind.item), hint, spec, text=text)
    words = [w.strip() for w in text.split(",") if w.strip()]
    if kind.item in (int, float) and words:
        try:
            words = [_number(w, kind.item) for w in words]
        except ValueError:
            noun = "integers" if kind.item is int else "numbers"
            raise SettingError(name, f"expected comma-separated {noun}, got {text!r}",
                               text) from None
    return check_items(name, words, kind, spec, text=text, length=False)


def _number(word: str, item: Any) -> Any:
    return int(word) if item is int else float(word)


def _word(text: str, item: Any) -> Any:
    """A scalar as typed: numbers parsed where they parse (else left for `check`)."""
    if item in (int, float):
        try:
            return _number(text.strip(), item)
        except ValueError:
            return text
    return text


def field_settings(cls: type) -> dict[str, tuple[dataclasses.Field[Any], Any, Setting]]:
    """name -> (field, resolved type hint, Setting) of every declared setting of `cls`."""
    hints = typing.get_type_hints(cls)
    return {f.name: (f, hints[f.name], spec) for f in dataclasses.fields(cls)
            if (spec := spec_of(f)) is not None}


def check_fields(obj: Any, names: typing.Iterable[str] | None = None) -> dict[str, Any]:
    """Every declared setting of a dataclass instance checked; returns the normalised
    values that differ from what is stored (lists -> tuples, ints -> floats)."""
    changed = {}
    for name, (_, hint, spec) in field_settings(type(obj)).items():
        if names is not None and name not in names:
            continue
        value = getattr(obj, name)
        out = check(name, value, hint, spec)
        if out is not value and (type(out) is not type(value) or out != value):
            changed[name] = out
    return changed


# ------------------------------------------------------- a model's settings as keywords


def _concrete_number(value: Any) -> bool:
    """A number known now (not a traced or batched array)."""
    if isinstance(value, numbers.Number):
        return True
    return isinstance(value, np.ndarray | np.generic) and np.ndim(value) == 0


def _array(value: Any) -> bool:
    """An array of any kind: NumPy, JAX, a tracer (a vmapped or jitted value)."""
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") else noun + "s"


def _choice_problem(name: str, value: Any, spec: Setting) -> str | None:
    noun = name.replace("_", " ")
    choices = spec.choices or ()
    if isinstance(value, str) or spec.codes is None:
        if value in choices:
            return None
        return f"unknown {noun} {value!r}; valid {_plural(noun)}: {', '.join(choices)}"
    pairs = list(zip(choices, spec.codes, strict=True))
    if _concrete_number(value):
        if float(value) in spec.codes:
            return None
        article = "an" if noun[0] in "aeiou" else "a"
        return (f"{article} {noun} code must be "
                f"{' or '.join(f'{code:g} ({n})' for n, code in pairs)}, got {value!r}")
    if _array(value):
        return None
    return (f"{name} must be one of {', '.join(choices)} or its code "
            f"({', '.join(f'{code:g} {n}' for n, code in pairs)}), got {value!r}")


def _keyword_problem(name: str, value: Any, hint: Any, spec: Setting) -> str | None:
    """What is wrong with `value` as the keyword `name` (None: nothing)."""
    item = kind_of(hint).item
    if spec.choices is not None:
        return _choice_problem(name, value, spec)
    if item is bool and not isinstance(value, bool | np.bool_):
        return f"{name} must be true or false, got {value!r}"
    if item is int and (not isinstance(value, numbers.Integral)
                        or not spec.in_range(int(value))):
        return f"{name} must be an integer {spec.range_text()}, got {value!r}"
    if item is not float:
        return None
    if not _concrete_number(value):
        return None if spec.traced and _array(value) else (f"{name} must be a number, got "
                                                           f"{value!r}")
    if not spec.in_range(float(value)):
        return f"{name} must be {spec.range_text()}, got {value!r}"
    if not math.isfinite(float(value)):
        return f"{name} must be finite, got {value!r}"
    return None


def check_keywords(obj: Any) -> None:
    """Every declared setting of a model's configuration (`SWANConfig`) checked as a
    keyword argument, in the library's words: `ValueError("epsilon must be > 0, got
    0.0")`, `"unknown variant 'x'; valid variants: ..."`. A traced setting may hold an
    array or a tracer (a vmapped run's value: checked where it is a concrete number); a
    traced choice its name or its code (`Setting.codes`)."""
    for name, (_, hint, spec) in field_settings(type(obj)).items():
        problem = _keyword_problem(name, getattr(obj, name), hint, spec)
        if problem is not None:
            raise ValueError(problem)


# ------------------------------------------------------------ the declared grid axes

# The configurations whose grid axes any grid may hold (`grid_source`).
_GRID_SOURCES: list[type] = []
C = typing.TypeVar("C", bound=type)


def grid_source(cls: C) -> C:
    """Class decorator: `cls`'s grid settings are axes any grid may hold (`SWANConfig`'s
    `epsilon`, `adjacency`, ...). `swan_jax.train` checks a grid's values against them
    and traces a choice by its code (`traced_value`) without importing `cls`."""
    if cls not in _GRID_SOURCES:
        _GRID_SOURCES.append(cls)
    return cls


@functools.cache
def _axes_of(sources: tuple[type, ...]) -> dict[str, tuple[Any, Setting]]:
    return {name: (hint, spec) for cls in sources
            for name, (_, hint, spec) in field_settings(cls).items() if spec.grid}


def grid_axes() -> dict[str, tuple[Any, Setting]]:
    """name -> (type hint, `Setting`) of every axis the grid sources declare."""
    return dict(_axes_of(tuple(_GRID_SOURCES)))


def coded_choices() -> dict[str, dict[str, float]]:
    """The traced choices of the grid sources: name -> {choice: code}."""
    return {name: dict(zip(spec.choices or (), spec.codes, strict=True))
            for name, (_, spec) in grid_axes().items() if spec.codes is not None}


def traced_value(name: str, value: Any) -> Any:
    """A value of a traced setting as the number it is below the configuration: the one
    place a traced choice's name becomes its code (`adjacency`: sym 1, adj 0). A number
    comes back as a Python float, an array (a traced run's code) as it is."""
    if not isinstance(value, str):
        return value if _array(value) and not _concrete_number(value) else float(value)
    codes = coded_choices().get(name)
    if codes is None or value not in codes:
        valid = f"one of {', '.join(codes)}" if codes else "a number"
        raise ValueError(f"grid value {name}={value!r} cannot be traced: it must be {valid}")
    return codes[value]


def known_choice(name: str, value: Any) -> Any:
    """A traced choice as a configuration holds it: by its name when known (a name, or a
    concrete code such as a described run's), a traced run's code as it is."""
    if isinstance(value, str) or not _concrete_number(value):
        return value
    names = {code: choice for choice, code in coded_choices()[name].items()}
    return names[float(value)]
