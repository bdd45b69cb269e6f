"""The compiled row decoder (replicator/source/fast/compiled.pyx); everything else is in
pyproject.toml. The extension is optional: without Cython or a C compiler the install goes on
and the Python reference decoder runs (source.fast.native logs it at debug)."""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """A failed compile warns instead of failing the install (setuptools' ``optional`` is not
    honoured by every build path: `pip install -e .` failed without a compiler)."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # no compiler, no Python headers ...
            print(f"warning: the compiled decoder {ext.name} was not built ({exc}); "
                  "the Python reference decoder runs instead")

    def copy_extensions_to_source(self) -> None:  # editable installs: only what was built
        try:
            super().copy_extensions_to_source()
        except Exception as exc:
            print(f"warning: the compiled decoder was not copied ({exc})")


try:
    from Cython.Build import cythonize
except ImportError:  # a build without Cython: the reference decoder only
    cythonize = None


def decoder_extensions() -> list[Extension]:
    """The compiled decoder's extension, cythonized; empty without Cython. The one
    declaration of it: scripts/build-decoder builds the same in place (paths relative to the
    source tree's root, the working directory of both)."""
    if cythonize is None:
        return []
    return cythonize(
        [Extension("replicator.source.fast.compiled", ["replicator/source/fast/compiled.pyx"],
                   extra_compile_args=["-O2"])],
        language_level=3, quiet=True)


# pip's build backend (setuptools.build_meta) and `python setup.py` run this file as
# __main__; scripts/build-decoder reads it under another name for decoder_extensions alone
# (setup() would parse pyproject.toml, which needs setuptools >= 77).
if __name__ == "__main__":
    setup(ext_modules=decoder_extensions(), cmdclass={"build_ext": OptionalBuildExt})
