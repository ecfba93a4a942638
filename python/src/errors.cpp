// eagle's typed errors as Python exceptions that keep eagle's messages: eagle.Error (a
// RuntimeError) and its subclasses; InvalidArgument is a ValueError too, NotSupported a
// NotImplementedError too, so code written for Python's own exceptions catches them.
#include <Python.h>

#include "bindings.hpp"
#include "eagle/core/error.hpp"

namespace eagle::python {

namespace {
PyObject* g_error = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_not_supported = nullptr;
PyObject* g_record = nullptr;
PyObject* g_cuda = nullptr;

PyObject* make_type(nb::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("eagle.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (type == nullptr) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}
}  // namespace

void bind_errors(nb::module_& m) {
  g_error = make_type(m, "Error", PyExc_RuntimeError, "Base of every error eagle raises.");
  auto bases = [](PyObject* a, PyObject* b) { return PyTuple_Pack(2, a, b); };
  g_invalid = make_type(m, "InvalidArgument", bases(g_error, PyExc_ValueError),
                        "Bad input: the message names the argument and the rule it broke.");
  g_not_supported = make_type(m, "NotSupported", bases(g_error, PyExc_NotImplementedError),
                              "A typed decline: this implementation does not serve this input.");
  g_record = make_type(m, "RecordError", g_error,
                       "A recording that cannot become a correct graph (a race, a bad buffer).");
  g_cuda = make_type(m, "CudaError", g_error, "A failure reported by the CUDA runtime or driver.");
  // Most derived first: each eagle error becomes its own Python type.
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const InvalidArgument& e) {
      PyErr_SetString(g_invalid, e.what());
    } catch (const NotSupported& e) {
      PyErr_SetString(g_not_supported, e.what());
    } catch (const RecordError& e) {
      PyErr_SetString(g_record, e.what());
    } catch (const CudaError& e) {
      PyErr_SetString(g_cuda, e.what());
    } catch (const Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });
}

}  // namespace eagle::python
