"""The rule library; importing it registers every rule."""
from . import mutation, operators, containers, cells, math, builtins, arrays  # noqa: F401
from . import np_elementwise, np_reductions, np_linalg, np_shape, np_indexing  # noqa: F401
from . import np_signal, np_statistics, np_fft, np_selection, np_numeric  # noqa: F401
from . import np_ufunc, batches  # noqa: F401
from . import functional  # noqa: F401  (after containers and math: it wraps their rules)
from . import sets, stdlib  # noqa: F401  (before taped, which adds to the rules of - and -=)
from . import threads, processes, cluster  # noqa: F401  (after functional: as_python)
from . import taped  # noqa: F401  (its scalar paths fall back on the rules above)
from . import compiled_scalars  # noqa: F401  (the scalar functions of the compiled tier)
from . import tangent_python, tangent_objects, tangent_numpy  # noqa: F401  (forward rules)
from . import special  # noqa: F401  (after all of the above: it wraps their rules for your objects)
from . import private  # noqa: F401  (nested differentiation's writes)

from ..runtime.nesting import second_order_rules  # noqa: E402

second_order_rules()  # (reverse over forward of scalar arithmetic: after the forward rules)

np_ufunc.ufuncs_read()
arrays.rules_for_implementations()  # (last: of every rule above)
