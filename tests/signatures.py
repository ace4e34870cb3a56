"""Functions over every combination of Python's parameter kinds (positional-only,
positional-or-keyword, ``*args``, keyword-only with and without defaults, ``**kw``), and
calls of them in every way Python allows, shared by the tests of binding at each order."""
from hypothesis import strategies as st


def _make(posonly, poskw, varargs, kwonly, varkw):
    """A function over the given parameter kinds that is linear in each, with a
    distinct coefficient per parameter; an omitted (None) parameter counts its
    own default instead, so a wrongly bound default changes the value."""
    ps, body = [], []
    names = [f"p{i}" for i in range(posonly)] + [f"q{i}" for i in range(poskw)]
    ps += [f"p{i}=None" for i in range(posonly)]
    if posonly:
        ps.append("/")
    ps += [f"q{i}=None" for i in range(poskw)]
    ps.append("*va" if varargs else "*" if kwonly else "")
    ps += [f"k{i}=None" if i % 2 else f"k{i}" for i in range(kwonly)]
    names += [f"k{i}" for i in range(kwonly)]
    if varkw:
        ps.append("**vk")
    for c, n in enumerate(names, 2):
        body.append(f"s = s + {c} * ({n} if {n} is not None else {c / 10})")
    if varargs:  # (loops, not generator expressions: forward mode takes no generator yet)
        body += ["for j, v in enumerate(va):", "    s = s + (j + 11) * v"]
    if varkw:
        body += ["for k, v in sorted(vk.items()):", "    s = s + len(k) * 13 * v"]
    src = f"def f({', '.join(p for p in ps if p)}):\n" + "".join(f"    {x}\n" for x in ["s = 0.0", *body, "return s"])
    ns = {}
    exec(compile(src, f"<binding {src!r}>", "exec"), ns)
    return ns["f"], src


@st.composite
def calls(draw):
    """A generated function and a call of it: positional values and keyword values."""
    kinds = dict(posonly=draw(st.integers(0, 2)), poskw=draw(st.integers(0, 2)),
                 varargs=draw(st.booleans()), kwonly=draw(st.integers(0, 2)),
                 varkw=draw(st.booleans()))
    f, src = _make(**kinds)
    vals = iter(draw(st.lists(st.floats(-2, 2), min_size=12, max_size=12)))
    args, kw = [], {}
    npos = kinds["posonly"] + kinds["poskw"]
    n_given = draw(st.integers(0, npos))  # a prefix given positionally, the rest omitted or by name
    args = [next(vals) for _ in range(n_given)]
    for i in range(max(n_given, kinds["posonly"]), npos):
        if draw(st.booleans()):
            kw[f"q{i - kinds['posonly']}"] = next(vals)
    if kinds["varargs"] and n_given == npos:
        args += [next(vals) for _ in range(draw(st.integers(0, 2)))]
    for i in range(kinds["kwonly"]):
        if i % 2 == 0 or draw(st.booleans()):
            kw[f"k{i}"] = next(vals)
    if kinds["varkw"]:
        # ("p0" may name a positional-only parameter too: then **vk takes it)
        for name in draw(st.lists(st.sampled_from(["x", "yy", "p0"]), max_size=2, unique=True)):
            kw[name] = next(vals)
    return f, src, args, kw
