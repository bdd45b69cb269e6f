"""The compiled row decoder (replicator/source/fast/_native.pyx); everything else is in
pyproject.toml. The extension is optional: without Cython or a C compiler the install goes on
and the Python reference decoder runs (source.fast.native logs it at debug)."""

from setuptools import Extension, setup

try:
    from Cython.Build import cythonize
except ImportError:  # a build without Cython: the reference decoder only
    extensions = []
else:
    extensions = cythonize(
        [Extension("replicator.source.fast._native", ["replicator/source/fast/_native.pyx"],
                   extra_compile_args=["-O2"], optional=True)],
        language_level=3, quiet=True)

setup(ext_modules=extensions)
