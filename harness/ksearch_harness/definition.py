"""The parts of a FlashInfer-Bench Definition the harness needs, resolved once."""

from . import dtypes
from .errors import TaskError


class Tensor:
    __slots__ = ("name", "dtype_name", "dtype", "shape_spec", "field", "output")

    def __init__(self, name, spec, field, output=False):
        self.name = name
        # An output with shape [] is a 0-d array (a loss), never a scalar passed by value.
        self.output = output
        self.field = field
        if not isinstance(spec, dict):
            raise TaskError(field, f"{field} must be an object with 'shape' and 'dtype'")
        self.dtype_name = spec.get("dtype")
        if not isinstance(self.dtype_name, str) or not dtypes.known(self.dtype_name):
            raise TaskError(f"{field}.dtype", f"unknown dtype {self.dtype_name!r} for '{name}'")
        self.dtype = None  # NumPy dtype, filled by Spec.require_numpy
        self.shape_spec = spec.get("shape") or []

    @property
    def is_scalar(self):
        return not self.shape_spec and not self.output


class Spec:
    def __init__(self, definition):
        if not isinstance(definition, dict):
            raise TaskError("definition", "the definition must be a JSON object")
        axes = definition.get("axes") or {}
        self.const = {}
        self.var = []  # in definition order: the order var axes are passed to kernels
        for name, axis in axes.items():
            kind = axis.get("type") if isinstance(axis, dict) else None
            if kind == "const":
                self.const[name] = _int(axis.get("value"), f"definition.axes.{name}.value")
            elif kind == "var":
                self.var.append(name)
            else:
                raise TaskError(f"definition.axes.{name}.type",
                                f"axis '{name}' must have type 'const' or 'var', not {kind!r}")
        self.inputs = [Tensor(n, s, f"definition.inputs.{n}")
                       for n, s in (definition.get("inputs") or {}).items()]
        self.outputs = [Tensor(n, s, f"definition.outputs.{n}", output=True)
                        for n, s in (definition.get("outputs") or {}).items()]
        if not self.outputs:
            raise TaskError("definition.outputs", "the definition declares no outputs")
        # Inputs the kernel may write into (task.toml [kernel].writable_inputs): not checked
        # after a call (set_writable).
        self.writable = frozenset()
        for t in self.inputs + self.outputs:
            for axis in t.shape_spec:
                if not isinstance(axis, int) and axis not in self.const and axis not in self.var:
                    raise TaskError(f"{t.field}.shape",
                                    f"'{t.name}' uses axis {axis!r}, which definition.axes "
                                    f"does not declare")

    def set_writable(self, names):
        """The inputs a kernel may write into (GPU MODE's output buffers among the inputs)."""
        names = list(names or [])
        known = {t.name for t in self.inputs}
        for i, name in enumerate(names):
            if name not in known:
                raise TaskError(f"correctness.writable_inputs[{i}]",
                                f"the definition has no input {name!r}")
        self.writable = frozenset(names)

    def read_only(self, pristine, mine):
        """(input, before, after) for the inputs a candidate must leave as they were."""
        return [(t, b, a) for t, b, a in zip(self.inputs, pristine, mine)
                if t.name not in self.writable]

    def require_numpy(self, bfloat16_as_float32=False):
        """Fill every tensor's host NumPy dtype (see dtypes.host_numpy for bfloat16)."""
        for t in self.inputs + self.outputs:
            t.dtype = dtypes.host_numpy(t.dtype_name, f"{t.field}.dtype", bfloat16_as_float32)

    def axes_for(self, workload, index):
        """Every axis value (const and var) for one workload."""
        given = workload.get("axes") or {}
        values = dict(self.const)
        for name in self.var:
            if name not in given:
                raise TaskError(f"workloads[{index}].axes.{name}",
                                f"workload {index} does not give var axis '{name}'")
            values[name] = _int(given[name], f"workloads[{index}].axes.{name}")
            if values[name] < 0:
                raise TaskError(f"workloads[{index}].axes.{name}",
                                f"axis '{name}' is negative ({values[name]})")
        return values

    @staticmethod
    def shape(tensor, axes):
        return tuple(a if isinstance(a, int) else axes[a] for a in tensor.shape_spec)


def _int(value, field):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TaskError(field, f"{field} must be an integer, not {value!r}")
    return value
