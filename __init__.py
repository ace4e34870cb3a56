"""bytegrad: reverse-mode automatic differentiation of unmodified Python, by
source-to-source transformation of CPython bytecode."""
from .ir import UnsupportedError
from .runtime.api import (differentiable, grad, gradient, pullback, stages, stop_gradient,
                          value_and_grad, value_and_gradient)
from .runtime.errors import NoRuleError, NotScalarError
from .runtime.forward import Pullback, forward
from .runtime.rules import DuplicateRuleError, nondifferentiable
from .runtime.binding import KeywordGradientError
from .runtime.computing import DepthError
from .runtime.custom import RuleError, defrule, rule
from .runtime.utilities import checkpoint, hook, nestlevel
from .runtime.frules import NoForwardRuleError, frule
from .runtime.tangents import ForwardModeError
from .runtime.compiled import NotCompilableError, explain
from .runtime.forwarddiff import forwarddiff
from .runtime.nesting import NestingError
from .runtime.hessian import hessian, hvp
from .runtime.jax_api import jacfwd, jacobian, jacrev, jvp, tangent_stages, vjp
from . import primitives  # noqa: F401  (registers the rules)
from . import optim, testing, tree  # noqa: F401,E402  (bytegrad.optim, .testing, .tree)

__all__ = ["gradient", "pullback", "grad", "value_and_grad", "value_and_gradient",
           "differentiable", "stages", "stop_gradient", "forward", "Pullback", "rule", "nondifferentiable",
           "UnsupportedError", "NoRuleError", "NotScalarError",
           "defrule", "RuleError", "DuplicateRuleError", "KeywordGradientError", "DepthError",
           "hook", "checkpoint", "nestlevel",
           "jvp", "vjp", "jacfwd", "jacrev", "jacobian", "hessian", "hvp", "forwarddiff", "NestingError", "tree", "testing", "optim", "frule", "NoForwardRuleError", "ForwardModeError", "tangent_stages",
           "NotCompilableError", "explain"]
