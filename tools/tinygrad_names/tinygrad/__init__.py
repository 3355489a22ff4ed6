"""tinygrad's module names mapped onto lazygrad's objects, so tinygrad's own tests run unmodified
against lazygrad (tools/tinygrad_tests.sh puts this folder on the path).

Names only: every op, gradient and number comes from lazygrad. A tinygrad module lazygrad has
(`tinygrad.helpers` is `lazygrad.helpers`) gives lazygrad's names; a name lazygrad lacks, and
every name of a tinygrad internal (`tinygrad.uop.ops`, `tinygrad.codegen`, ...), is a
placeholder class that raises NotImplementedError naming it when called or asked for anything,
so the tests that use it fail with that reason and the others run.
"""
import importlib.abc
import importlib.machinery
import sys
import types

import lazygrad

# tinygrad's module -> lazygrad's module that has its names
MODULES = {
  "tinygrad": "lazygrad",
  "tinygrad.tensor": "lazygrad.tensor",
  "tinygrad.dtype": "lazygrad.dtype",
  "tinygrad.helpers": "lazygrad.helpers",
  "tinygrad.device": "lazygrad",
  "tinygrad.nn": "lazygrad.nn",
  "tinygrad.nn.optim": "lazygrad.nn.optim",
  "tinygrad.nn.state": "lazygrad.nn.state",
  "tinygrad.nn.datasets": "lazygrad.nn.datasets",
  "tinygrad.engine.jit": "lazygrad",
  "tinygrad.uop.ops": "lazygrad.uop",
  "tinygrad.engine.realize": "lazygrad.engine",
}


class _Missing(type):
  """The metaclass of a placeholder: using it in any way but isinstance raises."""
  def _raise(cls, *args, **kwargs):
    raise NotImplementedError(f"{cls.__qualname__} is a tinygrad internal lazygrad does not have")
  __call__ = _raise
  def __getattr__(cls, attr):
    if attr.startswith("__"): raise AttributeError(attr)
    cls._raise()


def _placeholder(module, name):
  return _Missing(name, (), {"__qualname__": f"{module}.{name}", "__module__": module})


class _Names(types.ModuleType):
  """A tinygrad module: lazygrad's module's names, else placeholders."""
  def __init__(self, name, source):
    super().__init__(name)
    self.__path__ = []  # a package, so its submodules import
    self._source = source
  def __getattr__(self, attr):
    if attr.startswith("__"): raise AttributeError(attr)
    if self._source is not None and hasattr(self._source, attr): return getattr(self._source, attr)
    return _placeholder(self.__name__, attr)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
  """Serves every `tinygrad.*` module below this package."""
  def find_spec(self, fullname, path, target=None):
    if fullname.startswith("tinygrad."): return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
    return None
  def create_module(self, spec):
    source = MODULES.get(spec.name)
    return _Names(spec.name, importlib.import_module(source) if source else None)
  def exec_module(self, module):
    pass


sys.meta_path.insert(0, _Finder())
_self = sys.modules[__name__]
for _name in dir(lazygrad):
  if not _name.startswith("__"): setattr(_self, _name, getattr(lazygrad, _name))
def __getattr__(attr):
  return _placeholder(__name__, attr)
