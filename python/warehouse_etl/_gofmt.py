"""Go's formatting of the values that appear in the Go reader's messages.

The Python reader's errors repeat the Go reader's wording (warehouse/reader_test.go,
``badInputCases``), so a few of Go's ``fmt`` verbs are reproduced here: ``%q`` of a
string or bytes, ``%v`` of an int slice, and ``strconv.FormatFloat(v, 'g', -1, 64)``;
and the two things Go does to the paths and OS errors those messages name:
``filepath.Join`` and ``syscall.Errno``'s text.
"""
import decimal
import os
import unicodedata

_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v",
            0x22: '\\"', 0x5C: "\\\\"}


def _printable(ch):
    # strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space.
    return ch == " " or unicodedata.category(ch)[0] in "LMNPS"


def quote(s):
    """Go's ``%q`` of a string: bytes that are not valid UTF-8 become ``\\xNN``."""
    b = s if isinstance(s, (bytes, bytearray)) else s.encode("utf-8", "surrogateescape")
    out = ['"']
    i = 0
    while i < len(b):
        c = b[i]
        if c < 0x80:
            if c in _ESCAPES:
                out.append(_ESCAPES[c])
            elif 0x20 <= c < 0x7F:
                out.append(chr(c))
            else:
                out.append("\\x%02x" % c)
            i += 1
            continue
        width = 2 if c >> 5 == 0b110 else 3 if c >> 4 == 0b1110 else 4 if c >> 3 == 0b11110 else 0
        try:
            ch = bytes(b[i:i + width]).decode("utf-8") if width else None
        except UnicodeDecodeError:
            ch = None
        if ch is None or len(ch) != 1:
            out.append("\\x%02x" % c)
            i += 1
            continue
        if _printable(ch):
            out.append(ch)
        elif ord(ch) < 0x10000:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append("\\U%08x" % ord(ch))
        i += width
    out.append('"')
    return "".join(out)


def ints(values):
    """Go's ``%v`` of an int slice: ``[1 2 3]``."""
    return "[" + " ".join(str(int(v)) for v in values) + "]"


def format_g(v):
    """``strconv.FormatFloat(v, 'g', -1, 64)``: the shortest digits, %e below 1e-4 and from 1e6."""
    v = float(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if str(v).startswith("-") else "0"
    sign, digits, exponent = decimal.Decimal(repr(v)).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exponent += 1
    nd = len(digits)
    dp = nd + exponent  # decimal point position
    ds = "".join(str(d) for d in digits)
    neg = "-" if sign else ""
    exp = dp - 1
    if exp < -4 or exp >= 6:
        mant = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return "%s%se%s%02d" % (neg, mant, "-" if exp < 0 else "+", abs(exp))
    if dp <= 0:
        return neg + "0." + "0" * (-dp) + ds
    if dp >= nd:
        return neg + ds + "0" * (dp - nd)
    return neg + ds[:dp] + "." + ds[dp:]


def go_join(*parts):
    """filepath.Join: joined and cleaned."""
    return os.path.normpath(os.path.join(*parts))


def go_errno(e):
    """An OSError's text as Go's syscall.Errno prints it (lower case)."""
    text = e.strerror or os.strerror(e.errno or 0)
    return text[:1].lower() + text[1:]
