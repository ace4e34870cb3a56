"""What the emitted code consults to decide whether a pullback needs the runtime's
attention (`ops.watch` names the protocol; the register pass puts `WATCH` into the
forward IR as its first operand)."""


class Watch:
    """``kinds``: the types of values that may be mutated later (their pullbacks must
    be told); ``all``: whether something has been mutated (then every pullback must be
    told); ``watcher``: the function that wraps such a pullback (`mutation.watcher`)."""

    kinds: set = set()
    all = False
    watcher = None

    def __repr__(self):
        return "WATCH"


WATCH = Watch()
