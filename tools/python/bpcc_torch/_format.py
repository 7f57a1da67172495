"""The bpcc model text format (docs/FORMAT.md), written and read in Python.

The writer produces exactly the canonical text that bpcc's C printer produces, so that a model
exported here is a fixed point of `bpcc fmt`. The reader accepts the whole grammar.
"""
import math
import re

BARE = re.compile(r"^[A-Za-z0-9_.]+$")
SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")

# IR element types <-> torch dtype names
SHORT = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
    "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
    "quint8": "qu8", "qint8": "qi8", "qint32": "qi32",
}
LONG = {v: k for k, v in SHORT.items()}
DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
                 "int": "int32", "short": "int16"}


class FormatError(ValueError):
    """A value that the format cannot hold, or a malformed file (with line:col)."""


# {==================== values ====================

class Node:
    """A reference to a node by name."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Node) and other.name == self.name

    def __hash__(self):
        return hash(("node", self.name))

    def __repr__(self):
        return "%" + self.name


class DType:
    """torch.<name> as written in the text; name is the torch name (float32, quint8 ...)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, DType) and other.name == self.name

    def __repr__(self):
        return "torch." + self.name


class Symbol:
    """A dotted named constant: torch.contiguous_format, torch.per_channel_affine ..."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Symbol) and other.name == self.name

    def __repr__(self):
        return self.name


class Device:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Device) and other.name == self.name


class TType:
    """A tensor type: element type (IR short name) and shape."""
    __slots__ = ("elem", "shape")

    def __init__(self, elem, shape):
        self.elem = elem
        self.shape = tuple(shape)

    def __eq__(self, other):
        return isinstance(other, TType) and (other.elem, other.shape) == (self.elem, self.shape)

    def __repr__(self):
        return "%s[%s]" % (self.elem, ", ".join(map(str, self.shape)))


def quote(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o == 0:
            raise FormatError("strings may not contain NUL")
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        else:
            out.append(ch)
    out.append('"')
    text = "".join(out)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError("string %r is not valid Unicode" % s)
    return text


def name(s):
    return s if BARE.match(s) else quote(s)


def format_float(f):
    if math.isnan(f):
        return "nan"
    return repr(f)  # shortest round-trip, what the C printer reproduces ("inf", "1e-05", "-0.0")


def format_value(v):
    if v is None:
        return "None"
    if v is True:
        return "True"
    if v is False:
        return "False"
    if isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            raise FormatError("integer %d does not fit in 64 bits" % v)
        return str(v)
    if isinstance(v, float):
        return format_float(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, Node):
        return "%" + v.name
    if isinstance(v, DType):
        return "torch." + v.name
    if isinstance(v, Symbol):
        return v.name
    if isinstance(v, Device):
        return "device(%s)" % quote(v.name)
    if isinstance(v, TType):
        return repr(v)
    if v is Ellipsis:
        return "..."
    if isinstance(v, slice):
        return "slice(%s, %s, %s)" % tuple(format_value(x) for x in (v.start, v.stop, v.step))
    if isinstance(v, tuple):
        if len(v) == 1:
            return "(%s,)" % format_value(v[0])
        return "(%s)" % ", ".join(format_value(x) for x in v)
    if isinstance(v, list):
        return "[%s]" % ", ".join(format_value(x) for x in v)
    if isinstance(v, dict):
        return "{%s}" % ", ".join("%s: %s" % (name(k), format_value(x)) for k, x in v.items())
    raise FormatError("cannot represent a value of type %s: %r" % (type(v).__name__, v))


# }================================================

class ModuleEntry:
    def __init__(self, name, type_, attrs=None, tensors=None):
        self.name = name
        self.type = type_
        self.attrs = attrs if attrs is not None else {}
        self.tensors = tensors if tensors is not None else []  # (role, name, TType)


class NodeEntry:
    def __init__(self, name, kind, target, args=(), kwargs=None, meta=None, scope=None):
        self.name = name
        self.kind = kind
        self.target = target
        self.args = tuple(args)
        self.kwargs = kwargs if kwargs is not None else {}
        self.meta = meta
        self.scope = scope  # (module path, module type) the node was traced in; None = root


class Model:
    def __init__(self, weights=None):
        self.weights = weights
        self.modules = []
        self.nodes = []


def print_model(m):
    lines = ["bpcc-model 1"]
    if any(e.tensors for e in m.modules):
        lines.append("weights " + quote(m.weights))
    lines.append("")
    for e in m.modules:
        attrs = " " + format_value(e.attrs) if e.attrs else ""
        lines.append("module %s : %s%s" % (name(e.name), name(e.type), attrs))
        for role, tname, tt in e.tensors:
            lines.append("  %s %s : %r" % (role, name(tname), tt))
    if m.modules:
        lines.append("")
    lines.append("graph")
    for n in m.nodes:
        line = "  %%%s = %s %s %s" % (n.name, n.kind, name(n.target), format_value(tuple(n.args)))
        if n.kwargs:
            line += " " + format_value(n.kwargs)
        if n.meta is not None:
            line += " : " + format_value(n.meta)
        if n.scope is not None:
            line += " @ %s : %s" % (name(n.scope[0]), name(n.scope[1]))
        lines.append(line)
    return "\n".join(lines) + "\n"


# {==================== reader ====================

_WORD = re.compile(r"[A-Za-z0-9_.]+")
_NUM = re.compile(r"-?(?:inf|nan|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)")
_TTYPE = re.compile(r"([a-z0-9]+)\[")
_DIM = re.compile(r"[0-9]+")
_KINDS = ("placeholder", "get_attr", "call_module", "call_function", "call_method", "output")


class _Line:
    def __init__(self, text, lineno, path):
        self.s = text
        self.i = 0
        self.lineno = lineno
        self.path = path

    def fail(self, msg):
        raise FormatError("%s:%d:%d: error: %s" % (self.path, self.lineno, self.i + 1, msg))

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\r":
            self.i += 1
        if self.i < len(self.s) and self.s[self.i] == "#":
            self.i = len(self.s)

    def peek(self):
        self.ws()
        return self.s[self.i] if self.i < len(self.s) else ""

    def accept(self, c):
        if self.peek() == c:
            self.i += 1
            return True
        return False

    def expect(self, c):
        if not self.accept(c):
            self.fail("expected '%s'" % c)

    def word(self):
        self.ws()
        m = _WORD.match(self.s, self.i)
        if not m:
            self.fail("expected a name")
        self.i = m.end()
        return m.group()

    def string(self):
        self.ws()
        if self.peek() != '"':
            self.fail("expected a string")
        self.i += 1
        out = []
        while True:
            if self.i >= len(self.s):
                self.fail("unterminated string")
            c = self.s[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c == "\\":
                e = self.s[self.i + 1:self.i + 2]
                self.i += 2
                if e in ('"', "\\"):
                    out.append(e)
                elif e in "ntr" and e:
                    out.append({"n": "\n", "t": "\t", "r": "\r"}[e])
                elif e == "x":
                    out.append(chr(int(self.s[self.i:self.i + 2], 16)))
                    self.i += 2
                else:
                    self.fail("unknown escape")
            else:
                out.append(c)
                self.i += 1

    def name(self):
        return self.string() if self.peek() == '"' else self.word()

    def eol(self):
        if self.peek():
            self.fail("expected end of line")

    def items(self, close, is_dict=False):
        out = {} if is_dict else []
        trailing = False
        while not self.accept(close):
            if is_dict:
                k = self.name()
                self.expect(":")
                out[k] = self.value()
            else:
                out.append(self.value())
            trailing = self.accept(",")
            if not trailing:
                self.expect(close)
                break
        return out, trailing

    def value(self):
        c = self.peek()
        if c == "%":
            self.i += 1
            return Node(self.word())
        if c == '"':
            return self.string()
        if c == "(":
            self.i += 1
            items, trailing = self.items(")")
            if len(items) == 1 and not trailing:
                self.fail("a one-element tuple is written '(x,)'")
            return tuple(items)
        if c == "[":
            self.i += 1
            return self.items("]")[0]
        if c == "{":
            self.i += 1
            return self.items("}", True)[0]
        if self.s.startswith("...", self.i):
            self.i += 3
            return Ellipsis
        m = _NUM.match(self.s, self.i)
        if m and (m.end() == len(self.s) or not _WORD.match(self.s[m.end()])):
            self.i = m.end()
            t = m.group()
            if t.lstrip("-").isdigit():
                return int(t)
            return float(t)
        w = self.word()
        if w == "None":
            return None
        if w in ("True", "False"):
            return w == "True"
        if w == "slice":
            self.expect("(")
            items, _ = self.items(")")
            if len(items) != 3:
                self.fail("slice takes three values")
            return slice(*items)
        if w == "device":
            self.expect("(")
            s = self.string()
            self.expect(")")
            return Device(s)
        if w.startswith("torch."):
            dn = DTYPE_ALIASES.get(w[6:], w[6:])
            if dn in SHORT:
                return DType(dn)
        if "." in w and SYMBOL.match(w) and not w.endswith("."):
            return Symbol(w)
        self.fail("unknown word '%s'" % w)

    def meta(self):
        c = self.peek()
        if c in "([":
            self.i += 1
            close = ")" if c == "(" else "]"
            out = []
            while not self.accept(close):
                if self.s.startswith("None", self.i):
                    self.i += 4
                    out.append(None)
                else:
                    out.append(self.meta())
                if not self.accept(","):
                    self.expect(close)
                    break
            return tuple(out) if c == "(" else out
        self.ws()
        m = _TTYPE.match(self.s, self.i)
        if not m or m.group(1) not in LONG:
            self.fail("expected a tensor type")
        elem = m.group(1)
        self.i = m.end()
        dims = []
        while not self.accept("]"):
            self.ws()
            mm = _DIM.match(self.s, self.i)
            if not mm:
                self.fail("expected a dimension")
            self.i = mm.end()
            dims.append(int(mm.group()))
            if not self.accept(","):
                self.expect("]")
                break
        return TType(elem, dims)


def parse_model(text, path="<text>"):
    m = Model()
    section = "header"
    cur = None
    for lineno, raw in enumerate(text.split("\n"), 1):
        ln = _Line(raw, lineno, path)
        if not ln.peek():
            continue
        if section == "header":
            ln.ws()
            if not raw.startswith("bpcc-model", ln.i):
                ln.fail("not a bpcc model file")
            ln.i += len("bpcc-model")
            if ln.word() != "1":
                ln.fail("unsupported model format version")
            ln.eol()
            section = "top"
            continue
        if section == "top":
            w = ln.word()
            if w == "weights":
                m.weights = ln.string()
            elif w == "module":
                mname = ln.name()
                ln.expect(":")
                mtype = ln.name()
                attrs = ln.items("}", True)[0] if ln.accept("{") else {}
                cur = ModuleEntry(mname, mtype, attrs)
                m.modules.append(cur)
            elif w in ("param", "buffer", "constant"):
                if cur is None:
                    ln.fail("tensor outside a module")
                tname = ln.name()
                ln.expect(":")
                cur.tensors.append((w, tname, ln.meta()))
            elif w == "graph":
                section = "graph"
            else:
                ln.fail("unexpected '%s'" % w)
            ln.eol()
            continue
        ln.expect("%")
        nname = ln.word()
        ln.expect("=")
        kind = ln.word()
        if kind not in _KINDS:
            ln.fail("unknown node kind '%s'" % kind)
        target = ln.name()
        ln.expect("(")
        args, trailing = ln.items(")")
        if len(args) == 1 and not trailing:
            ln.fail("a one-element tuple is written '(x,)'")
        kwargs = ln.items("}", True)[0] if ln.accept("{") else {}
        meta = ln.meta() if ln.accept(":") else None
        scope = None
        if ln.accept("@"):
            spath = ln.name()
            if not spath:
                ln.fail("a scope names a submodule; the root scope is written by leaving '@' out")
            ln.expect(":")
            scope = (spath, ln.name())
        ln.eol()
        m.nodes.append(NodeEntry(nname, kind, target, tuple(args), kwargs, meta, scope))
    if section != "graph":
        raise FormatError("%s: error: no graph section" % path)
    return m

# }================================================
