"""What the emitted code consults to decide whether a pullback needs the runtime's
attention (`ops.watch` names the protocol; the register pass puts `WATCH`, or
`UNCHANGED` for a value nothing changes in place, into the forward IR as its first
operand)."""


class Watch:
    """``kinds``: the types of values that may be mutated later (their pullbacks must
    be told); ``all``: whether something has been mutated (then every pullback must be
    told), one flag for every instance; ``watcher``: the function that wraps such a
    pullback (`mutation.watcher`)."""

    all = False
    watcher = None

    def __init__(self, name, kinds):
        self.name, self.kinds = name, kinds

    def __repr__(self):
        return self.name


WATCH = Watch("WATCH", set())
# for the value of a statement that the activity analysis found no code may change in
# place (not a hazard): only a mutation seen already makes its pullback need attention
UNCHANGED = Watch("UNCHANGED", frozenset())
