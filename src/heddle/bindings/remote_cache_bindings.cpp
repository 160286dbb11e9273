// heddle._C.runtime's remote cache: registers the Python client (python/heddle/core/remote_cache.py,
// redis-py) as the C++ kernel cache's RemoteBackend, and exposes get/put for the autotune store.
#include <pybind11/pybind11.h>

#include <optional>

#include "heddle/runtime/cache/remote_cache.h"

namespace py = pybind11;
using namespace heddle::rt;

namespace {

// The client module, imported on first use: a process that never sets HEDDLE_REMOTE_CACHE never loads it.
constexpr const char* kClientModule = "heddle.core.remote_cache";

// A Python exception as a backend failure: the client's own RemoteCacheFailure carries the reason
// ("timed out", "is unreachable: ..."); anything else is named with its type.
RemoteFailure failureOf(py::error_already_set& e) {
  py::object type = py::reinterpret_borrow<py::object>(e.type());
  std::string name = py::str(type.attr("__name__"));
  std::string text = py::str(e.value());
  return RemoteFailure(name == "RemoteCacheFailure" ? text : "failed: " + name + ": " + text);
}

// Calls get/put on the Python client under the Python lock. The object is released under that lock,
// or leaked when the interpreter is already gone (the process is ending).
class PythonBackend final : public RemoteBackend {
 public:
  explicit PythonBackend(py::object client) : client_(std::move(client)) {}
  ~PythonBackend() override {
    if (!Py_IsInitialized()) {
      client_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    client_ = py::object();
  }

  std::optional<std::string> get(const std::string& key) override {
    py::gil_scoped_acquire gil;
    try {
      py::object v = client_.attr("get")(key);
      if (v.is_none()) return std::nullopt;
      return std::string(v.cast<py::bytes>());
    } catch (py::error_already_set& e) { throw failureOf(e); }
  }

  void put(const std::string& key, const std::string& value) override {
    py::gil_scoped_acquire gil;
    try {
      client_.attr("put")(key, py::bytes(value));
    } catch (py::error_already_set& e) { throw failureOf(e); }
  }

 private:
  py::object client_;
};

std::shared_ptr<RemoteBackend> connectPython(const std::string& url) {
  py::gil_scoped_acquire gil;
  try {
    return std::make_shared<PythonBackend>(py::module_::import(kClientModule).attr("connect")(url));
  } catch (py::error_already_set& e) { throw failureOf(e); }
}

}  // namespace

void bindRemoteCache(py::module_& rt) {
  RemoteCache::global().setConnector(connectPython);
  rt.def(
      "remote_enabled",
      [] {
        py::gil_scoped_release release;
        return RemoteCache::global().enabled();
      },
      "HEDDLE_REMOTE_CACHE names a server, its client was built and it has not failed in this process "
      "(docs/runtime.md).");
  rt.def(
      "remote_get",
      [](const std::string& key) -> py::object {
        std::optional<std::string> v;
        {
          py::gil_scoped_release release;
          v = RemoteCache::global().get(key);
        }
        return v ? py::object(py::bytes(*v)) : py::none();
      },
      py::arg("key"), "The remote cache's value for `key` (bytes), or None (a miss, or the remote cache is off).");
  rt.def(
      "remote_put",
      [](const std::string& key, const std::string& value) {
        py::gil_scoped_release release;
        RemoteCache::global().put(key, value);
      },
      py::arg("key"), py::arg("value"),
      "Stores bytes under `key` (best effort: a failure turns the remote cache off).");
  rt.def(
      "remote_stats",
      [] {
        RemoteStats s = RemoteCache::global().stats();
        py::dict d;
        d["hits"] = s.hits;
        d["misses"] = s.misses;
        d["stores"] = s.stores;
        d["failures"] = s.failures;
        d["rejected"] = s.rejected;
        return d;
      },
      "What the remote cache did in this process: hits, misses, stores, failures, rejected (values that "
      "failed verification).");
}
