"""The IR: data model, lifter (bytecode → IR), emitter (IR → code), printer."""
from . import cpython  # first: it refuses an interpreter bytegrad does not support
from .errors import UnsupportedError
from .ir import IR, Block, Branch, Global, Meta, Slot, Stmt, Var, show
from . import ops
from .lift import lift
from .emit import emit, function
from .printer import dot
from .verify import verify
