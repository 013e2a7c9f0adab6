"""Quantities with units, as a person writes them: "8 Mbit/s", "32 GB", "200 TFLOPS".

Everything is converted to SI base units on the way in (bytes, seconds, bits/s,
FLOP/s, watts, dollars) and back to a readable prefix on the way out.

Decimal prefixes mean powers of 1000 (GB = 1e9 bytes); binary ones say so
(GiB = 2**30). The table is small and explicit on purpose: pint would parse
these too, but it knows no FLOP, token or dollar, and its registry costs about
half a second at every start of the CLI, which a sweep of a million points and
a fuzz target both feel.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Literal

from trainplan.errors import UserError

Dimension = Literal[
    "count",  # plain number, k/M/B/T suffixes allowed (tokens, parameters)
    "bytes",
    "byte_rate",  # bytes per second
    "bit_rate",  # bits per second
    "flop_rate",  # FLOP per second
    "flops",  # FLOP
    "time",  # seconds
    "power",  # watts
    "fraction",  # 0.25 or "25 %"
    "frequency",  # per second (fps)
    "dollars",
    "carbon",  # grams CO2-equivalent per kWh
    "sequence_length",  # tokens in a sequence: "8k" is 8,192 as the field writes context lengths
]

DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
# Sequence and context lengths are written in binary thousands: "8k" is 8,192 tokens, "128k" 131,072
# (every model card and config.json does so: max_position_embeddings 8192, 131072).
SEQUENCE_SUFFIX = {"": 1.0, "k": 2.0**10, "K": 2.0**10, "Ki": 2.0**10, "M": 2.0**20, "Mi": 2.0**20}
# What a count may name after its number ("2T tokens", "24 layers", "224 px"); never a unit of
# another dimension, so "8 MB" is still refused for a count.
COUNT_NOUNS = frozenset({
    "token", "tokens", "param", "params", "parameter", "parameters", "frame", "frames", "px", "pixel", "pixels",
    "layer", "layers", "camera", "cameras", "sequence", "sequences", "head", "heads", "expert", "experts",
    "request", "requests", "core", "cores", "epoch", "epochs", "step", "steps", "device", "devices", "gpu", "gpus",
    "accelerator", "accelerators", "checkpoint", "checkpoints", "copy", "copies", "attempt", "attempts",
})
# Suffixes people use for counts of parameters and tokens ("7B", "1.5T").
COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
# ... and the words ("2 trillion tokens", "7 billion parameters"): short scale, as English writes them.
COUNT_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}

# The one declaration of an hour in seconds; accounts import it from here.
SECONDS_PER_HOUR = 3600.0

TIME_UNITS = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "ms": 1e-3, "us": 1e-6,
    "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}

# ASCII digits only: Python's float() would read "٣" or "１０" as 3 and 10, which neither TOML nor a
# person checking the file would (issue 29)
_NUMBER = r"[-+]?(?:[0-9]+(?:_[0-9]+)*(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?(?:inf|nan)"
_GROUPED = re.compile(r"^([-+]?[0-9]{1,3}(?:,[0-9]{3})+)(?![0-9,])")
_QUANTITY = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[^\d\s].*?)?\s*$", re.IGNORECASE)

EXPECTED = {
    "count": "a number such as 1e9, 7B or 93M",
    "bytes": "a size such as 32 GB, 80 GiB or 1.5e9",
    "byte_rate": "a rate such as 1.5 GB/s or 25 GB/s",
    "bit_rate": "a bit rate such as 8 Mbit/s",
    "flop_rate": "a rate such as 989.5 TFLOPS",
    "flops": "an amount such as 1e21 FLOP or 6e23",
    "time": "a duration such as 1 h, 30 min or 14 s",
    "power": "a power such as 700 W or 1.2 kW",
    "fraction": "a fraction such as 0.25 or 25 %",
    "frequency": "a rate such as 30 or 30 fps",
    "dollars": "an amount such as 2.5 or $2.5",
    "sequence_length": "a length in tokens such as 2048, 8k (8,192) or 128k (131,072)",
}

BITS_PER_BYTE = 8.0


def _prefixed(unit: str, bases: tuple[str, ...]) -> float | None:
    """Multiplier of `unit` if it is an SI or binary prefix followed by one of `bases`."""
    for base in bases:
        if not unit.endswith(base):
            continue
        prefix = unit[: len(unit) - len(base)]
        if prefix in BINARY:
            return BINARY[prefix]
        if prefix in DECIMAL:
            return DECIMAL[prefix]
    return None


# Dimensions whose units are a plain table, added by the module that owns them.
_TABLES: dict[str, dict[str, float]] = {}


def register_dimension(dimension: str, table: dict[str, float], expected: str) -> None:
    """Add a dimension whose units are a fixed table of names to multipliers."""
    _TABLES[dimension] = table
    EXPECTED[dimension] = expected
    SYMBOL.setdefault(dimension, next(iter(table)))


def _unit_factor(unit: str, dimension: Dimension) -> float | None:
    """SI multiplier for `unit` in `dimension`, or None if the unit does not belong there."""
    u = unit.strip()
    if dimension in _TABLES:
        return _TABLES[dimension].get(u)
    if dimension == "count":
        # a suffix, then optionally what is counted: "7B", "2T tokens", "93M params", "224 px"
        if u.lower() in COUNT_NOUNS:  # "3 Tokens": a noun, not the T suffix
            return 1.0
        w = re.fullmatch(r"([A-Za-z]+)\s*([A-Za-z]*)", u)
        if w is not None and w.group(1).lower() in COUNT_WORDS and (not w.group(2) or w.group(2).lower() in COUNT_NOUNS):
            return COUNT_WORDS[w.group(1).lower()]
        m = re.fullmatch(r"([kKMBGTPE]?)\s*([A-Za-z]*)", u)
        if m is None or (m.group(2) and m.group(2).lower() not in COUNT_NOUNS):
            return None
        return COUNT_SUFFIX[m.group(1)]
    if dimension == "bytes":
        return _prefixed(u, ("B", "byte", "bytes"))
    if dimension in ("byte_rate", "bit_rate"):
        # a link is quoted in either: "400 Gbit/s" and "10 Gbps" for a network card, "25 GB/s" for PCIe
        for per in ("/s", "ps"):
            if u.endswith(per):
                in_bytes = _prefixed(u[: -len(per)], ("B", "byte", "bytes"))
                in_bits = _prefixed(u[: -len(per)], ("bit", "bits", "b"))
                if dimension == "byte_rate":
                    return in_bytes if in_bytes is not None else (
                        in_bits / BITS_PER_BYTE if in_bits is not None else None)
                return in_bits if in_bits is not None else (
                    in_bytes * BITS_PER_BYTE if in_bytes is not None else None)
        return None
    if dimension == "sequence_length":
        for noun in ("tokens", "token"):
            if u.endswith(noun):
                u = u[: -len(noun)].strip()
        return SEQUENCE_SUFFIX.get(u)
    if dimension == "flop_rate":
        for base in ("FLOPS", "FLOP/s", "flops", "flop/s", "FLOPs/s"):
            f = _prefixed(u, (base,))
            if f is not None:
                return f
        return None
    if dimension == "flops":
        return _prefixed(u, ("FLOP", "FLOPs", "flop", "flops"))
    if dimension == "time":
        return TIME_UNITS.get(u)
    if dimension == "power":
        return _prefixed(u, ("W",))
    if dimension == "fraction":
        return 0.01 if u == "%" else None
    if dimension == "frequency":
        if u in ("1/s", "per s"):
            return 1.0
        # "30 fps", "1.2 kHz", "1.5 k/s" as format_quantity writes it, "1M tokens/s", "120 frames/s"
        for base in ("fps", "frames/s", "tokens/s", "/s", "Hz"):
            if u.endswith(base) and u[: len(u) - len(base)].strip() in DECIMAL:
                return DECIMAL[u[: len(u) - len(base)].strip()]
        return None
    if dimension == "dollars":
        return 1.0 if u in ("$", "USD", "usd", "dollars") else None
    return None


# ---------------------------------------------------------------- the numeric boundary (issue 29)
# Every number trainplan reads passes `number` once, before any arithmetic: an integer past float
# range (OverflowError in float()), a string of more digits than Python converts (ValueError past
# sys.get_int_max_str_digits(), 4,300 by default), inf, nan and a subnormal (5e-324: a divisor that
# is "positive" yet overflows every quotient) are refused with one line naming the key.

#: The largest magnitude a number may have: float64's largest finite value (about 1.8e308).
LARGEST_NUMBER = sys.float_info.max
#: The smallest non-zero magnitude: float64's smallest normal value (about 2.2e-308). Below it a
#: float has lost precision (a subnormal) and 1/x overflows; no quantity trainplan plans is near it.
SMALLEST_NUMBER = sys.float_info.min
#: The largest whole number a count may be: 2^53, the last integer float64 holds exactly (and far
#: below int64's 2^63, where numpy's integer arrays and C longs overflow).
LARGEST_WHOLE = 2**53


def shown(value: object, limit: int = 60) -> str:
    """`value` as a message shows it: repr, but an integer too long to print (repr raises past
    4,300 digits) or to read is described by its size, and long text is cut."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 200:  # about 60 digits
            digits = int(value.bit_length() * math.log10(2)) + 1
            return f"an integer of about {digits:,} digits"
        return repr(value)
    try:
        text = repr(value)
    except ValueError:  # a container holding such an integer
        return f"a {type(value).__name__}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


def _integer_of_text(text: str, key: str) -> int:
    """The integer written as `text`, so that it is refused as the same integer unquoted is (its size,
    not 'inf'); past the digits Python converts (4,300) it is past float range anyway."""
    try:
        return int(text)
    except ValueError:
        digits = len(text.lstrip("+-").lstrip("0"))
        raise UserError(key, f"expected a number below {LARGEST_NUMBER:.3g} (float range), got an integer "
                        f"of about {digits:,} digits") from None


def number(value: object, key: str = "value", whole: bool = False) -> float:
    """`value` (an int, a float, or the text of one) as a finite float, refused with a UserError
    naming `key` when it is past float range, has too many digits, is inf or nan, or is a subnormal.
    With `whole`, an integer is also refused past LARGEST_WHOLE."""
    if isinstance(value, bool):
        raise UserError(key, f"expected a number, got {value!r}")
    if isinstance(value, str) and _INTEGER_TEXT.fullmatch(value.strip().replace("_", "")):
        value = _integer_of_text(value.strip().replace("_", ""), key)  # "1000...0" is read as 10^400 is
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            parsed = float(text)  # float() reads any number of digits (int() stops at 4,300)
        except ValueError:
            raise UserError(key, f"expected a number, got {shown(value)}") from None
        if math.isinf(parsed) and "inf" not in text.lower():  # "1e400", or 400 digits
            raise UserError(key, f"expected a number below {LARGEST_NUMBER:.3g} (float range), got {shown(value)}")
        value = parsed
    if isinstance(value, int):
        if whole and abs(value) > LARGEST_WHOLE:
            raise UserError(key, f"expected a whole number below 2^53 ({LARGEST_WHOLE:.3g}), got {shown(value)}")
        try:
            result = float(value)
        except OverflowError:
            raise UserError(key, f"expected a number below {LARGEST_NUMBER:.3g} (float range), got "
                            f"{shown(value)}") from None
    elif isinstance(value, float):
        result = value
    else:
        try:
            result = float(value)  # numpy scalars and the like
        except (TypeError, ValueError, OverflowError):
            raise UserError(key, f"expected a number, got {type(value).__name__}") from None
    if not math.isfinite(result):
        raise UserError(key, f"expected a finite number, got {shown(value)}")
    if result != 0 and abs(result) < SMALLEST_NUMBER:
        raise UserError(key, f"expected zero or a number of at least {SMALLEST_NUMBER:.3g} in size, got {result!r} "
                        "(a subnormal float: dividing by it overflows)")
    if whole and abs(result) > LARGEST_WHOLE:
        raise UserError(key, f"expected a whole number below 2^53 ({LARGEST_WHOLE:.3g}), got {shown(value)}")
    return result + 0.0  # -0.0 is 0: "-0 cores" are no cores, not "-0"


def float_literal(text: str) -> float | str:
    """A TOML float literal as a float (tomllib's parse_float); one past float range ("1e400", which
    float() reads as inf) is kept as its text, so that `number` refuses it naming the key and the
    range, not 'inf'."""
    value = float(text)
    return text if math.isinf(value) and "inf" not in text.lower() else value


def parse(value: object, dimension: Dimension, key: str = "value") -> float:
    """Turn a number or a string with a unit into a float in SI base units.

    Raises UserError naming `key` and what was expected.
    """
    if isinstance(value, bool):
        raise UserError(key, f"expected {EXPECTED[dimension]}, got {value!r}")
    if isinstance(value, (int, float)):
        result = number(value, key)
    elif isinstance(value, str):
        text = value.strip()
        if dimension == "dollars" and text.startswith("$"):
            text = text[1:].strip()
        if dimension == "dollars":  # "$1,234.50" as format_quantity writes it: strict thousands groups only
            text = _GROUPED.sub(lambda m: m.group(1).replace(",", ""), text)
        m = _QUANTITY.match(text)
        if not m:
            raise UserError(key, f"expected {EXPECTED[dimension]}, got {value!r}")
        unit = (m.group("unit") or "").strip()
        factor = 1.0 if unit == "" else _unit_factor(unit, dimension)
        if factor is None:
            raise UserError(key, f"expected {EXPECTED[dimension]}, got unit {unit!r} in {value!r}")
        if m.group("num").lstrip("+-").lower() in ("inf", "nan"):
            raise UserError(key, f"expected a finite number ({EXPECTED[dimension]}), got {shown(value)}")
        result = number(m.group("num"), key) * factor
        if not math.isfinite(result):  # "1e300 TB"
            raise UserError(key, f"expected a number below {LARGEST_NUMBER:.3g} in SI units, got {shown(value)}")
        result = number(result, key)
    else:
        raise UserError(key, f"expected {EXPECTED[dimension]}, got {type(value).__name__}")
    return result


SYMBOL = {
    "bytes": "B",
    "byte_rate": "B/s",
    "bit_rate": "bit/s",
    "flop_rate": "FLOP/s",
    "flops": "FLOP",
    "time": "s",
    "power": "W",
    "frequency": "/s",
    "count": "",
    "fraction": "",
    "dollars": "$",
    "sequence_length": "",
}

_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def format_quantity(value: float, dimension: Dimension, digits: int = 3) -> str:
    """A readable string that `parse` reads back to the same value within `digits` significant digits:
    the writer of values a user may copy back (a refusal's limit, a probe's measured figure), by
    the parser's dimension. A report's figures go through `format_figure` (below), by theirs."""
    if dimension == "fraction":
        if not math.isfinite(value * 100):  # beyond 1.8e306 the percentage overflows: write it plain
            return f"{value:.{digits}g}"
        return f"{value * 100:.{max(digits - 2, 1)}f} %"
    if dimension == "dollars":
        return f"${value:,.2f}" if abs(value) >= 0.01 or value == 0 else f"${value:.{digits}g}"
    if dimension == "sequence_length":  # whole tokens, written out: "8k" would read back as 8,192
        return f"{value:.0f}" if abs(value) < 1e15 else f"{value:.{digits}g}"
    if dimension == "time":
        for size, name in ((86400.0, "d"), (3600.0, "h"), (60.0, "min")):
            if abs(value) >= size:
                return f"{value / size:.{digits}g} {name}"
        return f"{value:.{digits}g} s"
    symbol = SYMBOL[dimension]
    for size, prefix in _PREFIXES:
        if abs(value) >= size:
            if dimension == "count":
                prefix = {"G": "B"}.get(prefix, prefix)
            return f"{value / size:.{digits}g} {prefix}{symbol}".rstrip()
    return f"{value:.{digits}g} {symbol}".rstrip()


# ---------------------------------------------------------------- natural forms the schema reads
# Each reads a value as a person writes it for one kind of key, and refuses the readings that are
# easy to get wrong without a word (a unit left off a size, a percentage written as a multiplier).

# No memory, buffer or file size trainplan plans is below a megabyte: a plain number under it is a
# unit left off ("80" for an 80 GB card), never a size someone means in bytes.
PLAUSIBLE_PLAIN_BYTES = 1e6


def _is_plain_number(value: object) -> bool:
    """A number, or text that is only a number (no unit)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        m = _QUANTITY.match(value.strip())
        return bool(m) and not (m.group("unit") or "").strip()
    return False


def parse_size(value: object, key: str = "value") -> float:
    """Bytes as `parse` reads them, refusing a plain number below PLAUSIBLE_PLAIN_BYTES:
    "80" is refused with "80 bytes? write 80 GB"; "80 GB", "80 GiB", "80 B" and 0 are read."""
    size = parse(value, "bytes", key)
    if _is_plain_number(value) and 0 < size < PLAUSIBLE_PLAIN_BYTES:
        shown = f"{size:g}"
        raise UserError(key, f"{shown} bytes? write {shown} GB (a plain number is read in bytes; write the "
                        f"unit, or '{shown} B' if bytes are meant)")
    return size


def parse_hours(value: object, key: str = "value") -> float:
    """Hours: a plain number is hours ("1000" is 1,000 h); with a unit, any duration ("1000 h", "90 min",
    "2 d")."""
    if _is_plain_number(value):
        return parse(value, "count", key)
    return parse(value, "time", key) / SECONDS_PER_HOUR


# A month is a twelfth of a Julian year (365.25 days), as storage is billed per calendar month.
SECONDS_PER_MONTH = 365.25 * 86400.0 / 12
MONTH_UNITS = {"month": 1.0, "months": 1.0, "mo": 1.0, "year": 12.0, "years": 12.0, "yr": 12.0, "y": 12.0}


def parse_months(value: object, key: str = "value") -> float:
    """Months: a plain number is months; "3 months", "1 year", or any duration ("90 d")."""
    if _is_plain_number(value):
        return parse(value, "count", key)
    if isinstance(value, str):
        m = _QUANTITY.match(value.strip())
        if m and (m.group("unit") or "").strip() in MONTH_UNITS:
            return parse(m.group("num"), "count", key) * MONTH_UNITS[(m.group("unit") or "").strip()]
    try:
        return parse(value, "time", key) / SECONDS_PER_MONTH
    except UserError:
        raise UserError(key, f"expected a duration in months such as 1, 3 months, 1 year or 90 d, got {value!r}") \
            from None


#: What counts of parameters and of tokens may be followed by ("7B params", "1.4T tokens"); any other count noun
#: ("7B tokens" for a model size) is refused by parse_counted.
PARAM_NOUNS = ("parameters", "parameter", "params", "param")
TOKEN_NOUNS = ("tokens", "token")


def parse_counted(value: object, nouns: tuple[str, ...], key: str = "value") -> float:
    """A count that may name what it counts: "8 cores", "3 epochs", "1M requests/day"."""
    if isinstance(value, str):
        text = value.strip()
        for noun in sorted(nouns, key=len, reverse=True):
            if text.lower().endswith(noun.lower()) and len(text) > len(noun):
                text = text[: -len(noun)].strip()
                break
        else:  # "8 epochs" for a count of cores names another count: refused, not read as 8 (issue 29)
            last = re.search(r"([A-Za-z]+)$", text)
            if last is not None and last.group(1).lower() in COUNT_NOUNS:
                raise UserError(key, f"expected {EXPECTED['count']}, optionally followed by {nouns[0]!r}, "
                                f"got {value!r}")
        try:
            return parse(text, "count", key)
        except UserError:
            raise UserError(key, f"expected {EXPECTED['count']}, optionally followed by {nouns[0]!r}, "
                            f"got {value!r}") from None
    return parse(value, "count", key)


def parse_headroom(value: object, key: str = "value") -> float:
    """Memory kept free, as a fraction of what is used: 0.25, "25 %", or a multiplier as spreadsheets write
    it: a plain number of 1 or more is a multiplier (1.25 is 25 % more), as is "1.25x".

    A plain 1.25 is never read as 125 %: whoever means that writes "125 %"."""
    if isinstance(value, str):
        text = value.strip()
        for mark in ("x", "X", "×"):
            if text.endswith(mark) or text.startswith(mark):
                number = parse(text.strip(mark).strip(), "count", key)
                if number < 1:
                    raise UserError(key, f"expected a multiplier of 1 or more (1.25x keeps 25 % free), got {value!r}")
                return number - 1.0
    if _is_plain_number(value):
        number = parse(value, "count", key)
        return number - 1.0 if number >= 1 else number
    return parse(value, "fraction", key)


def parse_price(value: object, per: tuple[str, ...], key: str = "value") -> float:
    """Dollars for one unit of something, the unit optionally written: "$3/h", "$2.50 per hour",
    "$0.023/GB-month", "0.01 $/GB"."""
    if isinstance(value, str):
        text = value.strip()
        for suffix in sorted(per, key=len, reverse=True):
            if text.lower().endswith(suffix.lower()) and len(text) > len(suffix):
                text = text[: -len(suffix)].strip()
                break
        return parse(text.removesuffix("$").strip() if not text.startswith("$") else text, "dollars", key)
    return parse(value, "dollars", key)


# ---------------------------------------------------------------- formatting: a figure as a person reads it
# The one writer of every figure a report shows (`format_figure`, by the figure's declared dimension,
# planning/figures.py), beside the parsers above, so each unit is read and written in this module.
# It never writes nan, inf, e+ or None.

_SI = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
# counts: "B" for billions, as parameter and token counts are written
_COUNT = [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")]
# what a figure that does not exist (nan, None) and an unbounded one (inf) read as
NOT_APPLICABLE = "n/a"
UNBOUNDED = "no limit"
# decimals beyond which a tiny value is written as "< 0.000…1"
MAX_DECIMALS = 9
# at and above this (after any prefix) a number is written as a power of ten: 1.23×10^18
MAX_PLAIN = 1e15


def significant(x: float, digits: int = 3) -> str:
    """`digits` significant digits in fixed notation with thousands commas; never an exponent."""
    if x == 0:
        return "0"
    if not math.isfinite(x):  # a finite figure scaled past the float range (1e306 kWh in Wh)
        return UNBOUNDED if x > 0 else f"-{UNBOUNDED}"
    magnitude = math.floor(math.log10(abs(x)))
    if abs(x) >= MAX_PLAIN:  # absurd but finite: a power of ten rather than 300 digits
        return f"{significant(x / 10.0 ** magnitude, digits)}×10^{magnitude}"
    decimals = max(0, digits - 1 - magnitude)
    if decimals > MAX_DECIMALS:
        return f"< {10.0 ** -MAX_DECIMALS:.{MAX_DECIMALS}f}" if x > 0 else f"> -{10.0 ** -MAX_DECIMALS:.{MAX_DECIMALS}f}"
    text = f"{x:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def _with_prefix(x: float, unit: str, table: list[tuple[float, str]] = _SI, digits: int = 3) -> str:
    for size, prefix in table:
        if abs(x) >= size:
            return f"{significant(x / size, digits)} {prefix}{unit}".rstrip()
    return f"{significant(x, digits)} {unit}".rstrip()


def _seconds(x: float) -> str:
    a = abs(x)
    for unit in ("d", "h", "min"):
        if a >= TIME_UNITS[unit]:
            return f"{significant(x / TIME_UNITS[unit])} {unit}"
    if a >= 1 or a == 0:
        return f"{significant(x)} s"
    if a >= 1e-3:
        return f"{significant(x * 1e3)} ms"
    return f"{significant(x * 1e6)} µs"


def _dollars(x: float) -> str:
    sign = "-" if x < 0 else ""
    a = abs(x)
    if a >= 1000:
        return f"{sign}${a:,.0f}" if a < MAX_PLAIN else f"{sign}${significant(a)}"
    if a >= 1 or a == 0:
        return f"{sign}${a:,.2f}"
    return f"{sign}${significant(a)}"


# dimension -> SI unit written after a decimal prefix ("9.48 GB", "396 TFLOP/s", "10.8 GB/h")
_SI_UNIT = {"bytes": "B", "flops": "FLOP", "flop_rate": "FLOP/s", "byte_rate": "B/s", "watts": "W", "joules": "J",
            "bytes_per_token": "B/token", "bytes_per_hour": "B/h", "bit_rate": "bit/s", "frequency": "Hz"}
# dimension -> what is counted, written after a count ("2.77 k frames/s")
_COUNTED_UNIT = {"frames_per_second": "frames/s", "tokens_per_second": "tokens/s",
                 "requests_per_second": "requests/s", "frames_per_hour": "frames/h", "tokens_per_hour": "tokens/h",
                 "parameters": "parameters", "epochs_per_month": "epochs a month", "requests_per_day": "requests a day",
                 "tokens": "tokens", "cores": "cores", "epochs": "epochs", "attempts": "attempts",
                 "per_month": "epochs a month", "months": "months"}
# a counted unit for exactly one
_SINGULAR = {"epochs": "epoch", "months": "month", "attempts": "attempt", "cores": "core", "tokens": "token",
             "parameters": "parameter"}
# dimension -> unit after a plain number with three significant digits
_PLAIN_UNIT = {"grams_per_kwh": "g/kWh", "flop_per_byte": "FLOP/B"}


def _format_number(x: float, dimension: str) -> str:
    if dimension in _SI_UNIT:
        unit = _SI_UNIT[dimension]
        base, _, per = unit.partition("/") if dimension in ("bytes_per_token", "bytes_per_hour") else (unit, "", "")
        return _with_prefix(x, base) + (f"/{per}" if per else "")
    if dimension in _COUNTED_UNIT:
        unit = _COUNTED_UNIT[dimension]
        if abs(x) >= MAX_PLAIN and len(unit) > 8:  # a long name: the number in its shortest form
            return f"{significant(x)} {unit}"
        if x == 1 and unit in _SINGULAR:  # "1 epoch", not "1 epochs"
            unit = _SINGULAR[unit]
        return f"{_with_prefix(x, '', _COUNT)} {unit}".replace("  ", " ")
    if dimension in _PLAIN_UNIT:
        return f"{significant(x)} {_PLAIN_UNIT[dimension]}"
    if dimension == "seconds":
        return _seconds(x)
    if dimension in ("hours", "days"):
        unit = "h" if dimension == "hours" else "days"
        return f"{significant(x)} {unit}" if abs(x) < 1000 or abs(x) >= MAX_PLAIN else f"{x:,.0f} {unit}"
    if dimension == "dollars":
        return _dollars(x)
    if dimension == "sequence_length":  # whole tokens, written out: "2.05 k" would read back as 2,099
        return f"{x:,.0f} tokens" if abs(x) < MAX_PLAIN else f"{significant(x)} tokens"
    if dimension == "dollars_per_hour":
        return f"{_dollars(x)}/h"
    if dimension == "dollars_per_gb":
        return f"{_dollars(x)}/GB"
    if dimension == "dollars_per_gb_month":
        return f"{_dollars(x)}/GB-month"
    if dimension == "speedup":
        return f"{significant(x)}x" if abs(x) < 1e4 else f"{_with_prefix(x, '', _COUNT)}x".replace(" x", "x")
    if dimension == "fraction":
        return f"{significant(x * 100)} %"
    if dimension in ("count", "pixels_per_token"):
        return _with_prefix(x, "", _COUNT) if abs(x) >= 1e4 else significant(x, 3 if abs(x) < 1000 else 4)
    if dimension == "kwh":
        return _with_prefix(x * 1e3, "Wh")
    if dimension == "kg":
        return f"{significant(x / 1000)} t" if abs(x) >= 1000 else f"{significant(x)} kg"
    return significant(x, 4)  # ratio and anything undeclared


def format_figure(value: Any, dimension: str | None) -> str:
    """A figure as a person reads it, by its dimension (see planning/figures.py)."""
    item = getattr(value, "item", None)  # a numpy scalar or 0-d array, read without importing numpy
    if item is not None and getattr(value, "ndim", 0) == 0:
        value = item()
    if value is None:
        return NOT_APPLICABLE
    if isinstance(value, bool) or dimension == "flag":
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        x = float(value)
        if math.isnan(x):
            return NOT_APPLICABLE
        if math.isinf(x):
            return UNBOUNDED if x > 0 else f"-{UNBOUNDED}"
        return _format_number(x, dimension or "ratio")
    if isinstance(value, (list, tuple)):
        return f"{len(value)} rows"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {format_figure(v, None)}" for k, v in value.items())
    return str(value)


def percent(fraction: float, signed: bool = False, digits: int = 1) -> str:
    """A fraction as a percentage in the reports' style ("34.6 %", "+13.1 %" signed): one decimal by default."""
    text = f"{fraction * 100:{'+' if signed else ''}.{digits}f} %"
    return text.replace("-0.0 %", "0.0 %").replace("+0.0 %", "0.0 %") if digits == 1 else text
