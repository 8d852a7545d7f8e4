"""The flags a CLI11 program accepts, read from its --help, and a check of an argument list
against them, so a flag renamed or removed in the daemon fails the manifest checks."""
from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass, field


class FlagsError(Exception):
    """The program's --help could not be run or read."""


@dataclass(eq=False)  # identity: the aliases of one option (-h, --help) share one Flag
class Flag:
    takes_value: bool
    required: bool
    repeatable: bool
    integer: bool
    size: bool  # bytes with an optional unit (CLI11's AsSizeValue: "UINT:SIZE ...")
    type: str
    default: str | None = None
    choices: list[str] | None = None
    range: tuple[float, float] | None = None


# A value CLI11's AsSizeValue reads: a number of bytes, or a number and a unit.
SIZE = r"[0-9]+(\.[0-9]+)?\s*([kmgtpe]i?b?|b)?"


def read_flags(binary: str) -> dict[str, Flag]:
    """Runs `binary --help` and parses its option list (see parse_help)."""
    try:
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise FlagsError(f"cannot run {binary} --help: no such file") from None
    except (OSError, subprocess.TimeoutExpired) as e:
        raise FlagsError(f"cannot run {binary} --help: {e}") from None
    if r.returncode != 0:
        raise FlagsError(f"cannot run {binary} --help: exit {r.returncode}: {r.stderr.strip()}")
    return parse_help(r.stdout, binary)


def parse_help(text: str, binary: str = "the program") -> dict[str, Flag]:
    """Parses the option lines CLI11 prints:
        "  --probe-port INT:INT in [0 - 65535]=0"   "  --no-toolkit          Serve only: ..."
        "  --store TEXT REQUIRED   Writable ..."     "  --baked TEXT:DIR ...  Read-only ..."
    The name and type column is separated from the description by two or more spaces.
    Returns {name: Flag} with every alias of an option (-h and --help) naming one Flag."""
    flags: dict[str, Flag] = {}
    for line in text.split("\n"):
        if not re.match(r"^ {1,4}-", line):
            continue
        head = re.split(r"\s{2,}", line.strip())[0]
        first = head.split()[0]
        rest = head[len(first):].strip()
        info = Flag(
            takes_value=rest != "",
            required=bool(re.search(r"\bREQUIRED\b", rest)),
            repeatable=bool(re.search(r"(^|\s)\.\.\.(\s|$)", rest)),
            integer=bool(re.match(r"^U?INT\b", rest)) and not rest.startswith("UINT:SIZE"),
            size=rest.startswith("UINT:SIZE"),
            type=rest,
        )
        default = re.search(r"=(\S+)\s*(REQUIRED|\.\.\.)?$", re.sub(r"\s+(REQUIRED|\.\.\.)$", "", rest))
        if default:
            info.default = default.group(1)
        choices = re.search(r"\{([^}]*)\}", rest)
        if choices:
            info.choices = [c.strip() for c in choices.group(1).split(",")]
        bounds = re.search(r"in \[(-?[0-9.]+) - (-?[0-9.]+)\]", rest)
        if bounds:
            info.range = (float(bounds.group(1)), float(bounds.group(2)))
        elif re.match(r"^UINT\b", rest):
            info.range = (0, math.inf)
        for name in first.split(","):
            if name.startswith("-"):
                flags[name] = info
    if "--help" not in flags and "-h" not in flags:
        raise FlagsError(f"{binary} --help printed no CLI11 option list (no --help line)")
    return flags


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)


def _suggest(name: str, known) -> str:
    stem = name[2:]
    near = [k for k in known if k.startswith("--") and (stem in k[2:] or k[2:] in stem)]
    return f" (did you mean {' or '.join(near)}?)" if near else ""


def check_args(args: list, flags: dict[str, Flag], program: str):
    """Checks args (a container's `args:`, or a unit's ExecStart after the program) against
    flags. Returns (problems, values): values maps each flag given to the list of its values;
    a flag without a value has the value True."""
    problems: list[str] = []
    values: dict[str, list] = {}
    i = 0
    while i < len(args):
        arg = str(args[i])
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            problems.append(f"unexpected argument {json.dumps(arg)}: {program} takes no positional arguments")
            continue
        eq = arg.find("=")
        inline = arg[eq + 1:] if eq > 0 and arg.startswith("--") else None
        name = arg[:eq] if inline is not None else arg
        info = flags.get(name)
        if info is None:
            problems.append(f"unknown flag {name}: {program} --help does not list it{_suggest(name, flags)}")
            continue
        value: object = True
        if info.takes_value:
            if inline is not None:
                value = inline
            elif i < len(args) and not str(args[i]).startswith("--"):
                value = str(args[i])
                i += 1
            else:
                problems.append(f"{name} needs a value ({info.type})")
                continue
            if info.choices and value not in info.choices:
                problems.append(f"{name}={value}: not one of {', '.join(info.choices)}")
            if info.size and not re.fullmatch(SIZE, value, re.IGNORECASE):
                problems.append(f"{name}={value}: not a size (bytes, or a number and a unit: 512MiB, 8GiB)")
            elif info.integer and not re.fullmatch(r"-?[0-9]+", value):
                problems.append(f"{name}={value}: not an integer")
            elif info.range and not info.size:
                try:
                    number = float(value)
                except ValueError:
                    problems.append(f"{name}={value}: not a number")
                else:
                    if not info.range[0] <= number <= info.range[1]:
                        low, high = (_number(b) for b in info.range)
                        problems.append(f"{name}={value}: out of range [{low} - {high}]")
        elif inline is not None:
            problems.append(f"{name} takes no value (given {json.dumps(inline)})")
            continue
        values.setdefault(name, []).append(value)
    seen: set[int] = set()
    for name, info in flags.items():
        if id(info) in seen:
            continue
        seen.add(id(info))
        given = [v for alias, other in flags.items() if other is info for v in values.get(alias, [])]
        if info.required and not given:
            problems.append(f"{name} is required by {program} and missing")
        if not info.repeatable and len(given) > 1:
            problems.append(f"{name} is given {len(given)} times; {program} takes it once")
    return problems, values


def flag_value(values: dict[str, list], flags: dict[str, Flag], name: str):
    """The value of a flag: the last one given, else the default --help prints, else None."""
    given = values.get(name)
    if given:
        return given[-1]
    info = flags.get(name)
    return info.default if info else None
