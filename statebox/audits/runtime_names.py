"""Names a program builds at run time, folded back to how they read spelled plainly.

Why: the rules read what a program names (`os.walk('/')`, `socket.create_connection(`,
a decoy's path). A program can build those names while it runs instead:
`__import__("so"+"cket")`, `os.walk(chr(47))`, `getattr(os, "wa"+"lk")`,
`base64.b64decode("L29wdA==").decode()`, `bytes.fromhex(...)`, a name bound once
and used later, `import socket as s; s.socket()`. Issue 24 found such a session
audited clean. Here the program's syntax tree is folded wherever every input is a
constant in the text, and `resolve` hands back the folded program (ast.unparse),
which the rules then read beside the original: the same session audits as it would
spelled plainly.

Safety: nothing is ever evaluated. Only constant inputs are folded, by a fixed
table of pure operations (concatenation, `chr`, joins, slices, a few `str`/`bytes`
methods, base64/base32/base16/hex decoding, rot13, `os.path.join`, pathlib's `/`, `joinpath` and
several parts given to `Path`); imports,
`getattr`, `sys.modules[...]` become plain names. Work is capped per program
(source size, node count, folded string length, passes, nested `exec` depth), and
a program that is not Python (shell, JSON, another language) is left alone.
"""

from __future__ import annotations

import ast
import base64
import binascii
import codecs
import posixpath
import re
import warnings
from functools import lru_cache
from typing import Callable

MAX_SOURCE = 200_000  # characters of one program
MAX_NODES = 30_000  # syntax tree nodes of one program
MAX_VALUE = 4_096  # characters (or bytes) of one folded constant
MAX_PASSES = 4  # a name bound from a name bound from ... (each pass resolves one more level)
MAX_EXEC_DEPTH = 2  # exec("...") of a program that exec's another

Value = str | bytes | int

def _decodebytes(value: str | bytes) -> bytes:
    """base64.decodebytes, which takes bytes only (a str raises TypeError, as it does there)."""
    if isinstance(value, str):
        raise TypeError("decodebytes() argument must be a bytes-like object, not 'str'")
    return base64.decodebytes(value)


# each takes ASCII str or bytes (the str form is what a script most often spells)
_B64_FUNCS: dict[str, Callable[[str | bytes], bytes]] = {"b64decode": base64.b64decode, "standard_b64decode": base64.b64decode,
              "urlsafe_b64decode": base64.urlsafe_b64decode, "decodebytes": _decodebytes,
              "b32decode": base64.b32decode, "b16decode": base64.b16decode, "b85decode": base64.b85decode,
              "a85decode": base64.a85decode}
_BINASCII_FUNCS: dict[str, Callable[[str | bytes], bytes]] = {"unhexlify": binascii.unhexlify, "a2b_hex": binascii.a2b_hex, "a2b_base64": binascii.a2b_base64}
_STR_METHODS = {"lower", "upper", "strip", "lstrip", "rstrip", "title", "capitalize", "swapcase", "casefold", "replace",
                "removeprefix", "removesuffix"}
_ENCODINGS = {"utf-8", "utf8", "ascii", "latin-1", "latin1", "iso-8859-1"}
_IMPORTERS = {"__import__", "importlib.import_module", "import_module", "builtins.__import__", "__builtins__.__import__"}
_NAMESPACE_CALLS = {"globals", "locals", "vars"}
_PERCENT_SAFE = re.compile(r"%[sdrc%]")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def resolve(code: str) -> str | None:
    """`code` with the names it builds at run time folded to constants and plain module names, or None when
    it is not Python or builds none (so the caller reads nothing twice)."""
    return _resolve(code, 0)


@lru_cache(maxsize=2048)
def _resolve(code: str, depth: int) -> str | None:
    if len(code) > MAX_SOURCE or not code.strip():
        return None
    try:
        # the agent's program, not ours: an invalid escape in it (`'\\d'`) warns as it parses (a SyntaxWarning on stderr
        # from Python 3.12), a line per program of a hostile session in the audit's output
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
            tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = tree_nodes(tree)
    if len(nodes) > MAX_NODES:
        return None
    folder = _Folder(_single_bindings(nodes), depth)
    try:
        for n in range(MAX_PASSES):
            folder.pass_changed = False
            folder.collect(nodes if n == 0 else tree_nodes(tree))  # the first pass reads the tree as parsed
            tree = folder.visit(tree)
            if not folder.pass_changed:
                break
        if not folder.changed:
            return None
        text = ast.unparse(tree)
    except (RecursionError, MemoryError, ValueError, TypeError):
        return None
    return "\n".join([text, *folder.extra])


def tree_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of `tree` in the order `ast.walk` yields them (breadth first, each node's fields in order).

    Why not `ast.walk`: its generator, deque and `iter_child_nodes` cost more than the parse itself on a short
    program, and the folder read the tree three times (counting, bindings, what names stand for). One list,
    walked once, serves all three on the first pass."""
    nodes = [tree]
    append, extend = nodes.append, nodes.extend
    node_type = ast.AST
    for node in nodes:  # grows while it is read: each node's children go to the end, as a queue
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                append(value)
            elif isinstance(value, list):
                extend(item for item in value if isinstance(item, node_type))
    return nodes


def _single_bindings(nodes: list[ast.AST]) -> set[str]:
    """Names bound exactly once in the whole program (`nodes`: all of its tree's): only those are replaced by
    what they were bound to."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in nodes:
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name)
                bind(name)  # bound elsewhere too: never folded
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name)
    return {name for name, n in counts.items() if n == 1}


def _small(value: Value) -> bool:
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < 2 ** 32
    return isinstance(value, (str, bytes)) and len(value) <= MAX_VALUE


def _const(node: ast.AST) -> Value | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes, int)) and not isinstance(node.value, bool):
        return node.value
    return None


def _consts(nodes: list[ast.expr]) -> list[Value] | None:
    values = [_const(n) for n in nodes]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _name_expr(dotted: str) -> ast.expr:
    return ast.parse(dotted, mode="eval").body


# pathlib's path classes, as a program names them (`from pathlib import Path as P` becomes `pathlib.Path` first)
_PATH_CLASSES = frozenset(("Path", "PurePath", "PosixPath", "PurePosixPath"))


def _path_value(node: ast.AST) -> str | None:
    """The path a `Path("/a")` call of one constant string stands for, else None."""
    if not isinstance(node, ast.Call) or node.keywords or len(node.args) != 1:
        return None
    func = _dotted(node.func) or ""
    if func.rsplit(".", 1)[-1] not in _PATH_CLASSES or func.count(".") > 1 or (func.count(".") == 1 and not func.startswith("pathlib.")):
        return None
    value = _const(node.args[0])
    return value if isinstance(value, str) else None


def _path_call(call: ast.Call, value: str) -> ast.Call:
    """`call`'s path class called on `value` alone."""
    return ast.Call(func=call.func, args=[ast.Constant(value)], keywords=[])


class _Folder(ast.NodeTransformer):
    """One bottom-up folding pass per `visit`; `collect` first learns what single-bound names stand for."""

    def __init__(self, single: set[str], depth: int) -> None:
        self.single = single
        self.depth = depth
        self.consts: dict[str, Value] = {}
        self.aliases: dict[str, str] = {}  # name -> dotted module or attribute it stands for
        self.modules: set[str] = set()  # top-level names of modules the program imports (however spelled)
        self.changed = False
        self.pass_changed = False
        self.extra: list[str] = []  # programs handed to exec/eval/compile as constants, resolved
        self._seen_extra: set[str] = set()

    # -- what names stand for ---------------------------------------------------------
    def collect(self, nodes: list[ast.AST]) -> None:
        """Learn from every node of the tree (`tree_nodes`) what its single-bound names stand for."""
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules.add(alias.name.split(".")[0])
                    if alias.asname and alias.asname in self.single:
                        self.aliases[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self.modules.add(node.module.split(".")[0])
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if alias.name != "*" and bound in self.single:
                        self.aliases[bound] = f"{node.module}.{alias.name}"
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) != 1 or not isinstance(targets[0], ast.Name) or targets[0].id not in self.single:
                    continue
                name = targets[0].id
                value = _const(node.value)
                if value is not None and _small(value):
                    self.consts[name] = value
                else:
                    dotted = _dotted(node.value)
                    if dotted and dotted.split(".")[0] != name:
                        self.aliases[name] = dotted

    def _changed(self, node: ast.AST, new: ast.AST) -> ast.AST:
        self.changed = self.pass_changed = True
        return ast.copy_location(new, node)

    def _value(self, node: ast.AST, value: Value | None) -> ast.AST:
        if value is None or not _small(value):
            return node
        return self._changed(node, ast.Constant(value))

    # -- names ---------------------------------------------------------------------------
    def visit_Name(self, node: ast.Name) -> ast.AST:
        """A single-bound name becomes what it was bound to. Alone that builds nothing (`n = 10`, `f = frames`),
        so it counts as a change only where it names a module the program imported (`import socket as s`)."""
        if not isinstance(node.ctx, ast.Load):
            return node
        if node.id in self.consts and _small(self.consts[node.id]):
            self.pass_changed = True
            return ast.copy_location(ast.Constant(self.consts[node.id]), node)
        target = self.aliases.get(node.id)
        if target and target != node.id:
            if target.split(".")[0] in self.modules:
                return self._changed(node, _name_expr(target))
            self.pass_changed = True
            return ast.copy_location(_name_expr(target), node)
        return node

    # -- operators -------------------------------------------------------------------------
    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Div) and isinstance(node.left, ast.Call):
            # pathlib's `/`: `Path("/data") / "annotations"` is `Path("/data/annotations")` (os.path.join's answer)
            base, part = _path_value(node.left), _const(node.right)
            if base is not None and isinstance(part, str) and _small(base + part):
                return self._changed(node, _path_call(node.left, posixpath.join(base, part)))
            return node
        left, right = _const(node.left), _const(node.right)
        if isinstance(node.op, ast.Mod) and isinstance(left, str) and _PERCENT_SAFE.sub("", left).count("%") == 0:
            args = _consts(list(node.right.elts)) if isinstance(node.right, ast.Tuple) else ([right] if right is not None else None)
            if args is not None:
                try:
                    return self._value(node, left % tuple(args))
                except (TypeError, ValueError, OverflowError):
                    return node
        if left is None or right is None:
            return node
        try:
            if isinstance(node.op, ast.Add) and type(left) is type(right):
                return self._value(node, left + right)  # type: ignore[operator]
            if isinstance(node.op, ast.Mult):
                if isinstance(left, int) and isinstance(right, int):
                    return self._value(node, left * right)
                count, seq = (right, left) if isinstance(right, int) else (left, right)
                if isinstance(count, int) and isinstance(seq, (str, bytes)) and 0 <= count and len(seq) * count <= MAX_VALUE:
                    return self._value(node, seq * count)
            if isinstance(left, int) and isinstance(right, int):
                if isinstance(node.op, ast.Sub):
                    return self._value(node, left - right)
                if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right:
                    return self._value(node, left // right if isinstance(node.op, ast.FloorDiv) else left % right)
                if isinstance(node.op, ast.BitXor):
                    return self._value(node, left ^ right)
        except (TypeError, ValueError, OverflowError):
            return node
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        value = _const(node.operand)
        if isinstance(value, int) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            # `-1` is an operator on a constant to the parser: folded quietly, it builds no name
            folded = -value if isinstance(node.op, ast.USub) else ~value if isinstance(node.op, ast.Invert) else value
            self.pass_changed = True
            return ast.copy_location(ast.Constant(folded), node)
        return node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        self.generic_visit(node)
        parts: list[str] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif isinstance(value, ast.FormattedValue) and value.format_spec is None and value.conversion == -1 \
                    and isinstance(_const(value.value), (str, int)):
                parts.append(str(_const(value.value)))
            else:
                return node
        return self._value(node, "".join(parts))

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        base, index = node.value, node.slice
        key = _const(index)
        if isinstance(key, str) and _IDENT.match(key) and "." not in key:
            if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in _NAMESPACE_CALLS:
                if not base.args:  # globals()["socket"]
                    return self._changed(node, ast.Name(key, ast.Load()))
                return self._changed(node, ast.Attribute(base.args[0], key, ast.Load()))  # vars(os)["walk"]
            dotted = _dotted(base)
            if dotted == "sys.modules":
                self.modules.add(key)
                return self._changed(node, _name_expr(key))
            if isinstance(base, ast.Attribute) and base.attr == "__dict__":
                return self._changed(node, ast.Attribute(base.value, key, ast.Load()))
        seq = _const(base)
        if isinstance(seq, (str, bytes)):
            if isinstance(index, ast.Slice):
                bounds = [None if part is None else _const(part) for part in (index.lower, index.upper, index.step)]
                given = [part for part in (index.lower, index.upper, index.step) if part is not None]
                if all(isinstance(_const(part), int) for part in given) and bounds[2] != 0:
                    ints = [b if isinstance(b, int) else None for b in bounds]  # the given ones are ints (checked)
                    return self._value(node, seq[slice(*ints)])
            elif isinstance(key, int) and -len(seq) <= key < len(seq):
                return self._value(node, seq[key])
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        return node

    # -- calls -------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.keywords:
            return node
        func = _dotted(node.func) or ""
        args = node.args
        first = _const(args[0]) if args else None
        if func in _IMPORTERS and isinstance(first, str) and _IDENT.match(first):
            self.modules.add(first.split(".")[0])
            return self._changed(node, _name_expr(first))
        if func == "getattr" and len(args) in (2, 3):
            name = _const(args[1])
            if isinstance(name, str) and _IDENT.match(name) and "." not in name:
                return self._changed(node, ast.Attribute(args[0], name, ast.Load()))
            return node
        if func == "sys.modules.get" and isinstance(first, str) and _IDENT.match(first):
            self.modules.add(first.split(".")[0])
            return self._changed(node, _name_expr(first))
        if func in ("exec", "eval", "compile", "builtins.exec", "builtins.eval") and isinstance(first, (str, bytes)):
            self._nested(first)
            return node
        if func == "chr" and len(args) == 1 and isinstance(first, int) and 0 <= first < 0x110000:
            return self._value(node, chr(first))
        if func in ("bytes", "bytearray") and len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
            values = _consts(list(args[0].elts))
            if values is not None and all(isinstance(v, int) and 0 <= v < 256 for v in values):
                return self._value(node, bytes(values))  # type: ignore[arg-type]
            return node
        if func in ("bytes.fromhex", "bytearray.fromhex", "binascii.unhexlify", "binascii.a2b_hex", "unhexlify") \
                and isinstance(first, (str, bytes)) and len(args) == 1:
            try:
                return self._value(node, bytes.fromhex(first.decode("ascii") if isinstance(first, bytes) else first))
            except (ValueError, UnicodeDecodeError):
                return node
        decoder = _B64_FUNCS.get(func.removeprefix("base64.")) if func.startswith("base64.") or func in _B64_FUNCS else None
        decoder = decoder or (_BINASCII_FUNCS.get(func.removeprefix("binascii.")) if func.startswith("binascii.") else None)
        if decoder is not None and len(args) == 1 and isinstance(first, (str, bytes)) and len(first) <= 4 * MAX_VALUE:
            try:
                return self._value(node, decoder(first))
            except (ValueError, binascii.Error, TypeError):
                return node
        if func in ("codecs.decode", "codecs.encode") and len(args) == 2 and isinstance(first, str) \
                and _const(args[1]) in ("rot13", "rot_13", "rot-13"):
            return self._value(node, codecs.decode(first, "rot13"))
        if func == "str" and len(args) == 2 and isinstance(first, bytes) and _const(args[1]) in _ENCODINGS:
            return self._value(node, _decode(first, str(_const(args[1]))))
        if func in ("os.fsdecode", "os.fsencode") and isinstance(first, (str, bytes)) and len(args) == 1:
            return self._value(node, _decode(first, "utf-8") if func == "os.fsdecode" and isinstance(first, bytes)
                               else first.encode() if isinstance(first, str) else first)
        if func in ("os.path.join", "posixpath.join") and args:
            parts = _consts(args)
            if parts is not None and all(isinstance(p, str) for p in parts):
                return self._value(node, posixpath.join(*parts))  # type: ignore[arg-type]
            return node
        if len(args) > 1 and _path_value(ast.Call(func=node.func, args=args[:1], keywords=[])) is not None:
            # `Path("/data", "annotations")`: the parts joined, as `/` joins them
            parts = _consts(args)
            if parts is not None and all(isinstance(p, str) for p in parts) and _small("".join(parts)):  # type: ignore[arg-type]
                return self._changed(node, _path_call(node, posixpath.join(*parts)))  # type: ignore[arg-type]
            return node
        if isinstance(node.func, ast.Attribute):
            if node.func.attr == "joinpath" and _path_value(node.func.value) is not None:
                base, parts = _path_value(node.func.value), _consts(args)
                if base is not None and parts is not None and all(isinstance(p, str) for p in parts) \
                        and _small(base + "".join(parts)):  # type: ignore[arg-type]
                    return self._changed(node, _path_call(node.func.value, posixpath.join(base, *parts)))  # type: ignore[arg-type, arg-type]
                return node
            return self._method(node, node.func)
        return node

    def _method(self, node: ast.Call, attr: ast.Attribute) -> ast.AST:
        owner = _const(attr.value)
        method = attr.attr
        if owner is None:
            return node
        args = node.args
        if method == "join" and isinstance(owner, (str, bytes)) and len(args) == 1:
            pieces = self._pieces(args[0])
            same = [p for p in pieces if type(p) is type(owner)] if pieces is not None else []
            if pieces is not None and len(same) == len(pieces) and sum(len(p) for p in same if not isinstance(p, int)) <= MAX_VALUE:
                return self._value(node, owner.join(same))  # type: ignore[arg-type]  # str.join(strs) or bytes.join(bytes): same type as owner, checked
            return node
        values = _consts(args)
        if values is None:
            return node
        try:
            if isinstance(owner, bytes) and method == "decode" and len(values) <= 1:
                return self._value(node, _decode(owner, str(values[0]) if values else "utf-8"))
            if isinstance(owner, str) and method == "encode" and len(values) <= 1:
                return self._value(node, owner.encode(str(values[0]) if values else "utf-8"))
            if isinstance(owner, str) and method == "format" and all(f in ("{}",) or f[1:-1].isdigit()
                                                                       for f in _FORMAT_FIELD.findall(owner)):
                return self._value(node, owner.format(*values))
            if isinstance(owner, (str, bytes)) and method in _STR_METHODS and len(values) <= 2 \
                    and all(type(v) is type(owner) for v in values):
                if method == "replace" and values and len(values[0]) == 0:  # type: ignore[arg-type]
                    return node
                result = getattr(owner, method)(*values)
                return self._value(node, result)
        except (LookupError, ValueError, TypeError, IndexError, UnicodeError):
            return node
        return node

    def _pieces(self, node: ast.AST) -> list[Value] | None:
        """The constant pieces a join joins: a list/tuple of constants, `map(chr, [..])`, `chr(c) for c in [..]`."""
        if isinstance(node, (ast.List, ast.Tuple)):
            return _consts(list(node.elts))
        if isinstance(node, ast.Call) and _dotted(node.func) == "map" and len(node.args) == 2 \
                and _dotted(node.args[0]) == "chr" and isinstance(node.args[1], (ast.List, ast.Tuple)):
            codes = _consts(list(node.args[1].elts))
            if codes is not None and all(isinstance(c, int) and 0 <= c < 0x110000 for c in codes):
                return [chr(c) for c in codes]  # type: ignore[arg-type]
        if isinstance(node, (ast.GeneratorExp, ast.ListComp)) and len(node.generators) == 1:
            gen = node.generators[0]
            elt = node.elt
            if gen.ifs or not isinstance(gen.target, ast.Name) or not isinstance(gen.iter, (ast.List, ast.Tuple)):
                return None
            codes = _consts(list(gen.iter.elts))
            if codes is None:
                return None
            if isinstance(elt, ast.Call) and _dotted(elt.func) == "chr" and len(elt.args) == 1 \
                    and isinstance(elt.args[0], ast.Name) and elt.args[0].id == gen.target.id:
                if all(isinstance(c, int) and 0 <= c < 0x110000 for c in codes):
                    return [chr(c) for c in codes]  # type: ignore[arg-type]
            if isinstance(elt, ast.Name) and elt.id == gen.target.id:
                return codes
        return None

    def _nested(self, source: str | bytes) -> None:
        """A program handed to exec/eval as a constant: read it too (resolved, or as written)."""
        if self.depth >= MAX_EXEC_DEPTH:
            return
        text = _decode(source, "utf-8") if isinstance(source, bytes) else source
        if text is None or text in self._seen_extra:
            return
        self._seen_extra.add(text)
        self.extra.append(_resolve(text, self.depth + 1) or text)
        self.changed = True


def _decode(data: bytes, encoding: str) -> str | None:
    try:
        return data.decode(encoding if encoding.lower() in _ENCODINGS else "utf-8")
    except (UnicodeDecodeError, LookupError):
        return None
