// softdla._cudla_ext: the C half of softdla.cudla. It loads a libcudla.so.1 (softdla's by default,
// another one named by SOFTDLA_CUDLA_LIBRARY, e.g. NVIDIA's on a Jetson), calls its functions with
// the GIL released, and provides StructBase: owned or borrowed struct memory with the buffer protocol,
// which the Python classes of softdla.cudla build their fields on.
#include <dlfcn.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cudla.h"
#include "host_staging.h"
#include "softdla/cudla_ext.h"

namespace nb = nanobind;

namespace {

// ---------------------------------------------------------------- the library
struct Library {
  void* handle = nullptr;
  std::string path, error;
};

Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("SOFTDLA_CUDLA_LIBRARY");
    std::string candidates[2];
    if (env && *env) {
      candidates[0] = env;
    } else {
      // Next to this extension (installed package), then the build tree it was built in.
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&library), &info) && info.dli_fname) {
        std::string dir = info.dli_fname;
        dir = dir.substr(0, dir.rfind('/') + 1);
        candidates[0] = dir + "libcudla.so.1";
      }
      candidates[1] = SOFTDLA_BUILD_LIBCUDLA;
    }
    for (const std::string& c : candidates) {
      if (c.empty()) continue;
      if ((lib.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) {
        lib.path = c;
        return;
      }
      lib.error += std::string(lib.error.empty() ? "" : "; ") + dlerror();
    }
  });
  return lib;
}

template <class Fn>
Fn symbol(const char* name) {
  Library& lib = library();
  if (!lib.handle) throw std::runtime_error("cannot load libcudla.so.1 (" + lib.error + "); set SOFTDLA_CUDLA_LIBRARY");
  void* p = dlsym(lib.handle, name);
  if (!p) {
    // NVIDIA's bindings raise FunctionNotFoundError, a RuntimeError, at the first call.
    throw std::runtime_error(std::string("function ") + name + " is not found");
  }
  return reinterpret_cast<Fn>(p);
}

#define CUDLA_CALL(name, ...)                                   \
  [&] {                                                         \
    static const auto fn = symbol<decltype(&::name)>(#name);    \
    nb::gil_scoped_release release;                             \
    return fn(__VA_ARGS__);                                     \
  }()

// ---------------------------------------------------------------- struct memory
// Views of an object's memory (memoryview, NumPy arrays, whose base is the object itself once NumPy has
// released the export) stay valid as long as the object: replacing the memory (obj[0] = array) copies
// in place when the object owns memory of that size, and otherwise retires the old memory and its
// owner until the object dies. (At most one retirement per borrowed object in practice: after it the
// object owns memory of its size and later replacements are in place.)
struct Storage {
  std::unique_ptr<uint8_t[]> owned;
  nb::object owner;  // keeps borrowed memory alive (and, for a memoryview, unresizable)
};

struct StructBase {
  uint8_t* data = nullptr;
  size_t size = 0;
  Storage storage;
  std::vector<Storage> retired;  // replaced memory that views may still point into
  bool readonly = false;

  void replace(Storage next, uint8_t* p, size_t n, bool ro) {
    Storage old = std::move(storage);
    storage = std::move(next);
    data = p, size = n, readonly = ro;
    if (old.owned || old.owner.is_valid()) retired.push_back(std::move(old));
  }
};

int struct_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  StructBase* s = nb::inst_ptr<StructBase>(nb::handle(self));
  if ((flags & PyBUF_WRITABLE) && s->readonly) {
    PyErr_SetString(PyExc_BufferError, "this instance is read-only");
    return -1;
  }
  if (PyBuffer_FillInfo(view, self, s->data, Py_ssize_t(s->size), s->readonly ? 1 : 0, flags) < 0) return -1;
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>("b") : nullptr;
  return 0;
}

PyType_Slot struct_slots[] = {{Py_bf_getbuffer, reinterpret_cast<void*>(struct_getbuffer)}, {0, nullptr}};

}  // namespace

NB_MODULE(_cudla_ext, m) {
  m.doc() = "C half of softdla.cudla (library loading, GIL-free calls, struct memory, host staging)";
  bind_host_staging(m);

  nb::class_<StructBase>(m, "StructBase", nb::type_slots(struct_slots))
      .def(nb::init<>())
      .def("_allocate", [](StructBase& s, size_t n) {
        Storage next;
        next.owned.reset(new uint8_t[n]());
        uint8_t* p = next.owned.get();
        s.replace(std::move(next), p, n, false);
      }, "Zero-filled memory owned by this object.")
      .def("_borrow", [](StructBase& s, uintptr_t ptr, size_t n, nb::object owner, bool readonly) {
        if (!ptr) throw nb::value_error("cannot borrow a null pointer");
        Storage next;
        next.owner = std::move(owner);
        s.replace(std::move(next), reinterpret_cast<uint8_t*>(ptr), n, readonly);
      }, "Wrap memory kept alive by `owner`.")
      .def("_copy_from", [](StructBase& s, uintptr_t ptr, size_t n, bool readonly) {
        if (!ptr && n) throw nb::value_error("cannot copy from a null pointer");
        if (s.storage.owned && s.size == n) {  // in place: views of this object stay valid and live
          std::memmove(s.data, reinterpret_cast<const void*>(ptr), n);
          s.readonly = readonly;
          return;
        }
        Storage next;
        next.owned.reset(new uint8_t[n]);
        std::memcpy(next.owned.get(), reinterpret_cast<const void*>(ptr), n);
        uint8_t* p = next.owned.get();
        s.replace(std::move(next), p, n, readonly);
      }, "Own a copy of `n` bytes at `ptr`.")
      .def_prop_ro("ptr", [](const StructBase& s) { return reinterpret_cast<uintptr_t>(s.data); },
                   "Address of the struct (int).")
      .def_prop_ro("_readonly", [](const StructBase& s) { return s.readonly; })
      .def_prop_ro("_size", [](const StructBase& s) { return s.size; })
      .def_prop_ro("_retired", [](const StructBase& s) { return s.retired.size(); },
                   "Replaced memory blocks kept for views that may point into them.");

  m.def("library_path", [] {
    Library& lib = library();
    if (!lib.handle) throw std::runtime_error("cannot load libcudla.so.1 (" + lib.error + ")");
    return lib.path;
  }, "Path of the libcudla.so.1 in use.");

  m.def("get_version", [] {
    uint64_t v = 0;
    const int s = CUDLA_CALL(cudlaGetVersion, &v);
    return nb::make_tuple(s, v);
  });
  m.def("device_get_count", [] {
    uint64_t v = 0;
    const int s = CUDLA_CALL(cudlaDeviceGetCount, &v);
    return nb::make_tuple(s, v);
  });
  m.def("create_device", [](uint64_t device, uint32_t flags) {
    cudlaDevHandle h = nullptr;
    const int s = CUDLA_CALL(cudlaCreateDevice, device, &h, flags);
    return nb::make_tuple(s, reinterpret_cast<uintptr_t>(h));
  });
  m.def("destroy_device", [](uintptr_t h) { return int(CUDLA_CALL(cudlaDestroyDevice, reinterpret_cast<cudlaDevHandle>(h))); });
  m.def("mem_register", [](uintptr_t h, uintptr_t ptr, size_t size, uint32_t flags) {
    uint64_t* dev = nullptr;
    const int s = CUDLA_CALL(cudlaMemRegister, reinterpret_cast<cudlaDevHandle>(h), reinterpret_cast<const uint64_t*>(ptr),
                             size, &dev, flags);
    return nb::make_tuple(s, reinterpret_cast<uintptr_t>(dev));
  });
  m.def("mem_unregister", [](uintptr_t h, uintptr_t dev_ptr) {
    return int(CUDLA_CALL(cudlaMemUnregister, reinterpret_cast<cudlaDevHandle>(h), reinterpret_cast<const uint64_t*>(dev_ptr)));
  });
  m.def("module_load_from_memory", [](uintptr_t h, uintptr_t p_module, size_t size, uint32_t flags) {
    cudlaModule mod = nullptr;
    const int s = CUDLA_CALL(cudlaModuleLoadFromMemory, reinterpret_cast<cudlaDevHandle>(h),
                             reinterpret_cast<const uint8_t*>(p_module), size, &mod, flags);
    return nb::make_tuple(s, reinterpret_cast<uintptr_t>(mod));
  });
  m.def("module_get_attributes", [](uintptr_t mod, int attr, uintptr_t attribute) {
    return int(CUDLA_CALL(cudlaModuleGetAttributes, reinterpret_cast<cudlaModule>(mod), cudlaModuleAttributeType(attr),
                          reinterpret_cast<cudlaModuleAttribute*>(attribute)));
  });
  m.def("module_unload", [](uintptr_t mod, uint32_t flags) {
    return int(CUDLA_CALL(cudlaModuleUnload, reinterpret_cast<cudlaModule>(mod), flags));
  });
  m.def("submit_task", [](uintptr_t h, uintptr_t tasks, uint32_t n, uintptr_t stream, uint32_t flags) {
    return int(CUDLA_CALL(cudlaSubmitTask, reinterpret_cast<cudlaDevHandle>(h), reinterpret_cast<const cudlaTask*>(tasks),
                          n, reinterpret_cast<void*>(stream), flags));
  });
  m.def("device_get_attribute", [](uintptr_t h, int attr, uintptr_t out) {
    return int(CUDLA_CALL(cudlaDeviceGetAttribute, reinterpret_cast<cudlaDevHandle>(h), cudlaDevAttributeType(attr),
                          reinterpret_cast<cudlaDevAttribute*>(out)));
  });
  m.def("get_last_error", [](uintptr_t h) { return int(CUDLA_CALL(cudlaGetLastError, reinterpret_cast<cudlaDevHandle>(h))); });
  m.def("set_task_timeout_in_ms", [](uintptr_t h, uint32_t t) {
    return int(CUDLA_CALL(cudlaSetTaskTimeoutInMs, reinterpret_cast<cudlaDevHandle>(h), t));
  });
  m.def("import_external_memory", [](uintptr_t h, uintptr_t desc, uint32_t flags) {
    uint64_t* dev = nullptr;
    const int s = CUDLA_CALL(cudlaImportExternalMemory, reinterpret_cast<cudlaDevHandle>(h),
                             reinterpret_cast<const cudlaExternalMemoryHandleDesc*>(desc), &dev, flags);
    return nb::make_tuple(s, reinterpret_cast<uintptr_t>(dev));
  });
  m.def("import_external_semaphore", [](uintptr_t h, uintptr_t desc, uint32_t flags) {
    uint64_t* dev = nullptr;
    const int s = CUDLA_CALL(cudlaImportExternalSemaphore, reinterpret_cast<cudlaDevHandle>(h),
                             reinterpret_cast<const cudlaExternalSemaphoreHandleDesc*>(desc), &dev, flags);
    return nb::make_tuple(s, reinterpret_cast<uintptr_t>(dev));
  });
  m.def("tensor_scale", [](uintptr_t mod, int is_output, uint32_t index) {
    // softdla's extension export; absent from other libraries (then the caller handles int8 itself).
    Library& lib = library();
    void* p = lib.handle ? dlsym(lib.handle, "softdlaModuleGetTensorScale") : nullptr;
    if (!p) return nb::make_tuple(-1, 1.0f);
    float scale = 1.f;
    int s;
    {
      nb::gil_scoped_release release;
      s = reinterpret_cast<decltype(&softdlaModuleGetTensorScale)>(p)(reinterpret_cast<cudlaModule>(mod), is_output, index,
                                                                     &scale);
    }
    return nb::make_tuple(s, scale);
  });
  m.def("tensor_name", [](uintptr_t mod, int is_output, uint32_t index) {
    // softdla's extension export: the whole name (descriptors keep 80 bytes); absent elsewhere.
    Library& lib = library();
    void* p = lib.handle ? dlsym(lib.handle, "softdlaModuleGetTensorName") : nullptr;
    if (!p) return nb::make_tuple(-1, std::string());
    const auto get = reinterpret_cast<decltype(&softdlaModuleGetTensorName)>(p);
    size_t need = 0;
    int s;
    std::string name;
    {
      nb::gil_scoped_release release;
      s = get(reinterpret_cast<cudlaModule>(mod), is_output, index, nullptr, &need);
      if (s == 0 && need > 0) {
        name.assign(need, '\0');
        s = get(reinterpret_cast<cudlaModule>(mod), is_output, index, name.data(), &need);
        name.resize(need - 1);
      }
    }
    return nb::make_tuple(s, name);
  });
  m.def("get_nv_sci_sync_attributes", [](uintptr_t attr_list, uint32_t flags) {
    return int(CUDLA_CALL(cudlaGetNvSciSyncAttributes, reinterpret_cast<uint64_t*>(attr_list), flags));
  });
}
