"""What the emitted code consults to decide whether a pullback needs the runtime's
attention (`ops.watch` names the protocol; the register pass puts `WATCH`, or `KEPT`
for a value the function neither changes nor hands on, into the forward IR as its
first operand)."""


class Watch:
    """``kinds``: the types of values that may be mutated later (their pullbacks must
    be told); ``all``: whether something has been mutated (then every pullback must be
    told); ``watcher``: the function that wraps such a pullback (`mutation.watcher`)."""

    def __init__(self, name):
        self.name, self.kinds, self.all, self.watcher = name, set(), False, None

    def __repr__(self):
        return self.name


WATCH = Watch("WATCH")
# For the values of `transforms.kept`: an array (exactly an ndarray) made there is read
# only by calls that change nothing, so its pullback needs telling only once something
# has been mutated; its kinds are WATCH's but the ndarray (`mutation.watch_kind`).
KEPT = Watch("KEPT")


def set_all(flag: bool):
    """Whether something has been mutated, for both."""
    WATCH.all = KEPT.all = flag
