"""Help texts in words: every option's value is named by what it is (KEY=VALUE, FILE, N), never by
the Python type typer would print (`<list[str]>`, `<int>`, `<path>`).

One place for the whole command line, so a command module added later needs no metavar of its own:
`WordedGroup` (the top-level group class) fills in a word for every parameter that has none when a
command is looked up. A metavar written in a command module always wins.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.core import TyperGroup

#: Options whose value has a form worth showing, by option name.
FORMS: dict[str, str] = {
    "--set": "KEY=VALUE",
    "--vary": "KEY=START:STOP[:STEP]",
    "--for": "TARGET",
    "--price": "KIND=DOLLARS",
    "--fix": "NAME=VALUE",
    "--source": "NAME:TOKENS:WEIGHT",
    "--channel": "V1,V2,...",
    "--law": "E,A,B,ALPHA,BETA",
    "--range": "START:STOP",
    "--among": "NAMES",
    "--figures": "NAMES",
    "--against": "KEY",
    "--buffers": "SIZES",
    "--port": "PORT",
    "--seed": "SEED",
    "--decode-dist": "DISTRIBUTION",
}

#: Options whose text value (not a file) has a better word than its flag's last word.
TEXT_FORMS: dict[str, str] = {
    "--plot": "FIGURE",
}

WHOLE_NUMBER = "N"
"""The word for a whole-number value (a count, a size in pixels, a seed)."""
NUMBER = "NUMBER"
"""The word for a real-number value (a share, seconds, a coefficient)."""


def _descriptor(param: Any) -> tuple[Any, bool, tuple[Any, ...]]:
    """(the value's Python type, whether it is a list, its choices) from typer's descriptor, or from
    a plain click parameter."""
    desc = getattr(param, "type_descriptor", None)
    if desc is not None:
        annotation = getattr(desc, "annotation", None)
        is_list = bool(getattr(desc, "is_list", False))
        if is_list and getattr(annotation, "__args__", None):
            annotation = annotation.__args__[0]
        choices = tuple(desc.choices or ()) if getattr(desc, "is_choice", False) else ()
        return annotation, is_list, choices
    click_type = getattr(param, "type", None)
    choices = tuple(getattr(click_type, "choices", ()) or ())
    py = {"integer": int, "float": float, "path": Path, "text": str}.get(getattr(click_type, "name", ""), str)
    return py, bool(getattr(param, "multiple", False)) or getattr(param, "nargs", 1) != 1, choices


def word_for(param: Any) -> str | None:
    """The metavar a parameter should show, in words; None for a flag (it takes no value)."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    name = (param.name or "value").lower()
    annotation, is_list, choices = _descriptor(param)
    if param.param_type_name == "argument":
        return name.upper()  # the usage line adds "..." to an argument that takes several
    opts = sorted(param.opts, key=len, reverse=True)
    for opt in opts:
        if opt in FORMS:
            return FORMS[opt]
    if choices:
        return "|".join(str(getattr(c, "value", c)) for c in choices)
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "PATH" if name in ("path", "directory") else "FILE"
    if annotation is bool:
        return "yes|no"
    if annotation is int:
        return WHOLE_NUMBER
    if annotation is float:
        return NUMBER
    for opt in opts:
        if opt in TEXT_FORMS:
            return TEXT_FORMS[opt]
    # a text value is named after its flag's last word: --format FORMAT, --read-latency LATENCY
    return opts[0].lstrip("-").split("-")[-1].upper() if opts else name.upper()


def word_metavars(command: Any) -> Any:
    """Give every parameter of `command` (and of its subcommands) without a metavar one in words."""
    for param in getattr(command, "params", ()):
        if param.metavar is None:
            word = word_for(param)
            if word is not None:
                param.metavar = word
        if param.param_type_name == "argument" and hasattr(param, "display_type_rich"):
            # typer prints an argument's Python type beside its name ("FILE <path>"); the name says it
            param.display_type_rich = _no_type
    for sub in getattr(command, "commands", {}).values():
        word_metavars(sub)
    return command


def _no_type(ctx: Any) -> None:
    return None


class WordedGroup(TyperGroup):
    """The top-level group: commands, eager or built on first use, show their values in words."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        word_metavars(self)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            word_metavars(command)
        return name, command, rest
