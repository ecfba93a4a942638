"""Every public name of the package has a docstring (the typed stubs carry them too)."""

import enum
import inspect

import eagle

PUBLIC_MODULES = ("eagle", "eagle.kernels", "eagle.diff", "eagle.op", "eagle.ragged", "eagle.comm",
                  "eagle.data")


def public_members(obj):
    for name in dir(obj):
        if name.startswith("_"):
            continue
        value = getattr(obj, name)
        if isinstance(value, (int, float, str, bool, enum.Enum, eagle.Device)):
            continue
        if type(value).__name__ == "_Feature":  # from __future__ import annotations
            continue
        yield name, value


def test_every_public_name_has_a_docstring():
    missing = []
    for module_name in PUBLIC_MODULES:
        module = eval(module_name)  # noqa: S307 (a fixed list of our own modules)
        for name, value in public_members(module):
            if inspect.ismodule(value):
                continue
            doc = inspect.getdoc(value)
            if not doc:
                missing.append(f"{module_name}.{name}")
            if inspect.isclass(value) and value.__module__.startswith("eagle"):
                for member, attr in public_members(value):
                    if isinstance(attr, type) and issubclass(attr, BaseException):
                        continue
                    if member in ("args", "with_traceback", "add_note"):
                        continue
                    if not inspect.getdoc(attr):
                        missing.append(f"{module_name}.{name}.{member}")
    assert not missing, "no docstring: " + ", ".join(missing)


def test_typed_stubs_ship_with_the_package():
    import pathlib

    stubs = pathlib.Path(eagle.__file__).parent / "_eagle"
    for name in ("__init__", "op", "ragged", "comm", "data"):
        assert (stubs / f"{name}.pyi").is_file(), f"missing stub {name}.pyi"
    text = (stubs / "__init__.pyi").read_text()
    assert "class Recorder" in text and "def plan(" in text
    assert (pathlib.Path(eagle.__file__).parent / "py.typed").is_file()


def test_the_stubs_parse():
    import ast
    import pathlib

    for stub in (pathlib.Path(eagle.__file__).parent / "_eagle").glob("*.pyi"):
        ast.parse(stub.read_text(), filename=str(stub))  # a SyntaxError fails the test
