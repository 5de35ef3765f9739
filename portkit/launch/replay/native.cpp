// The compiled replayer: the per-call half of launch/replay in C++ (see executor.py,
// which does the same in Python and is what the CPU tests exercise).
//
// run(leaves) keys the call by its leaves' metadata (dtype, device, sizes, strides of
// each tensor; type and bits of each scalar), and on a hit allocates the recorded
// buffers with torch's caching allocator, launches the recorded kernels with the data
// pointers of this call on torch's current stream, and builds the result. A miss
// returns None and the caller runs the launcher.
//
// Built without PORTKIT_WITH_CUDA (a CPU build of torch) it replays CPU tensors with no
// stream: that is how the CPU tests exercise this file, with a launch function of theirs.
#include <Python.h>
#include <pybind11/pybind11.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/python_variable.h>
#ifdef PORTKIT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// cuLaunchKernel and cuGetErrorName, by address (the caller finds them in libcuda), so
// this file needs neither cuda.h nor linking the driver.
using LaunchKernel = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, void*, void**, void**);
using ErrorName = int (*)(int, const char**);
constexpr int kInvalidContext = 201;  // CUDA_ERROR_INVALID_CONTEXT

struct Launch {
  void* function;
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;
  std::vector<uint64_t> params;  // one 8-byte slot per parameter; zeros where pointers go
  std::vector<std::pair<size_t, int64_t>> pointers;  // (slot, reference)
};

struct Plan {
  c10::Device device = c10::Device(c10::kCPU);
  std::vector<at::Tensor> buffers;  // meta tensors: sizes, strides and dtype to allocate
  std::vector<Launch> launches;
  py::object result;  // template: tuples, lists, None, and ints as references
  py::object eager;   // what the op returns in plain eager (run_eager), or None
};

template <typename T>
void append(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Appends one leaf to the key; false where the leaf cannot be keyed (a miss, always).
bool append_leaf(PyObject* leaf, std::string& key, int& device) {
  // ``device``: -2 until the first tensor; then that tensor's device (type and index).
  if (leaf == Py_None) {
    key.push_back('n');
    return true;
  }
  if (leaf == Py_True || leaf == Py_False) {
    key.push_back(leaf == Py_True ? 'B' : 'b');
    return true;
  }
  if (PyLong_CheckExact(leaf)) {
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(leaf, &overflow);
    if (overflow) return false;
    key.push_back('i');
    append(key, value);
    return true;
  }
  if (PyFloat_CheckExact(leaf)) {
    key.push_back('f');
    append(key, PyFloat_AS_DOUBLE(leaf));
    return true;
  }
  if (PyUnicode_CheckExact(leaf)) {
    Py_ssize_t size = 0;
    const char* text = PyUnicode_AsUTF8AndSize(leaf, &size);
    if (text == nullptr) {
      PyErr_Clear();
      return false;
    }
    key.push_back('s');
    append(key, static_cast<int64_t>(size));
    key.append(text, size);
    return true;
  }
  // A plain Tensor or Parameter only, as in executor.py: a subclass may make its outputs
  // its own type, and fake, functorch and other wrapper tensors dispatch through Python
  // or have no storage; the launcher decides for those.
  if (!THPVariable_CheckExact(leaf)) return false;
  const at::Tensor& tensor = THPVariable_Unpack(leaf);
  if (!tensor.has_storage() || tensor.key_set().has(c10::DispatchKey::Python)) return false;
  int where = static_cast<int>(tensor.device().type()) * 256 + tensor.get_device() + 1;
  if (device == -2) {
    device = where;
  } else if (device != where) {
    return false;
  }
  key.push_back('T');
  append(key, static_cast<int8_t>(tensor.scalar_type()));
  append(key, static_cast<int32_t>(where));
  append(key, static_cast<int8_t>(tensor.dim()));
  for (int64_t size : tensor.sizes()) append(key, size);
  for (int64_t stride : tensor.strides()) append(key, stride);
  return true;
}

bool make_key(const py::tuple& leaves, std::string& key, int& device) {
  key.reserve(64);
  for (const auto& leaf : leaves) {
    if (!append_leaf(leaf.ptr(), key, device)) return false;
  }
  return true;
}

class Replayer {
 public:
  // ``functorch_level``: torch._C._functorch.peek_interpreter_stack, what OpCallable asks
  // (functorch's C++ header needs a JSON library torch does not ship).
  Replayer(uintptr_t launch_kernel, uintptr_t error_name, size_t capacity,
           py::object functorch_level)
      : launch_kernel_(reinterpret_cast<LaunchKernel>(launch_kernel)),
        error_name_(reinterpret_cast<ErrorName>(error_name)),
        capacity_(capacity),
        functorch_level_(std::move(functorch_level)) {}

  // The key of these leaves as bytes, or None where they cannot be keyed.
  py::object key(const py::tuple& leaves) const {
    std::string key;
    int device = -2;
    if (!make_key(leaves, key, device)) return py::none();
    return py::bytes(key);
  }

  py::object run(const py::tuple& leaves) {
    const Plan* plan = find(leaves);
    if (plan == nullptr) return py::none();
    return build(plan->result, leaves, execute(*plan, leaves));
  }

  // portkit.load's op called in plain eager (OpCallable's fast path, in one call): None
  // unless PyTorch is not watching (no dispatch or function mode, no functorch
  // transform; the caller has asked torch.compiler.is_compiling() first), no gradient is
  // wanted, and the signature was recorded with an eager result (its key admits plain
  // Tensors and Parameters only). OpCallable checks the same in Python.
  py::object run_eager(const py::tuple& leaves) {
    if (c10::impl::TorchDispatchModeTLS::stack_len() > 0 || at::impl::torch_function_mode_enabled() ||
        !functorch_level_().is_none()) {
      return py::none();
    }
    bool grad = c10::GradMode::is_enabled();
    for (const auto& leaf : leaves) {
      PyObject* raw = leaf.ptr();
      if (grad && THPVariable_CheckExact(raw) && THPVariable_Unpack(raw).requires_grad()) {
        return py::none();  // autograd must see the call
      }
    }
    const Plan* plan = find(leaves);
    if (plan == nullptr || plan->eager.is_none()) return py::none();
    return build(plan->eager, leaves, execute(*plan, leaves));
  }


  // Remembers a recording under the key of its leaves; false where they cannot be keyed.
  // ``device``: where the buffers go, as torch writes it ("cuda:0", "cpu").
  bool add(const py::tuple& leaves, const std::string& device, const py::list& buffers,
           const py::list& launches, const py::object& result, const py::object& eager) {
    std::string key;
    int leaf_device = -2;
    if (!make_key(leaves, key, leaf_device)) return false;
    Plan plan;
    plan.device = c10::Device(device);
    for (const auto& buffer : buffers) {
      plan.buffers.push_back(THPVariable_Unpack(buffer.ptr()));
    }
    for (const auto& item : launches) {
      // (function, grid, block, shared bytes, parameter block, ((slot, reference), ...))
      py::tuple fields = py::reinterpret_borrow<py::tuple>(item);
      Launch launch;
      launch.function = reinterpret_cast<void*>(fields[0].cast<uintptr_t>());
      py::tuple grid = fields[1].cast<py::tuple>();
      py::tuple block = fields[2].cast<py::tuple>();
      for (int axis = 0; axis < 3; ++axis) {
        launch.grid[axis] = grid[axis].cast<unsigned>();
        launch.block[axis] = block[axis].cast<unsigned>();
      }
      launch.shared = fields[3].cast<unsigned>();
      std::string packed = fields[4].cast<std::string>();
      if (packed.size() % sizeof(uint64_t) != 0) {
        throw std::invalid_argument("parameter block is not a whole number of 8-byte slots");
      }
      launch.params.resize(packed.size() / sizeof(uint64_t));
      std::memcpy(launch.params.data(), packed.data(), packed.size());
      for (const auto& pointer : fields[5].cast<py::tuple>()) {
        py::tuple pair = pointer.cast<py::tuple>();
        size_t slot = pair[0].cast<size_t>();
        if (slot >= launch.params.size()) throw std::out_of_range("pointer slot out of range");
        launch.pointers.emplace_back(slot, pair[1].cast<int64_t>());
      }
      plan.launches.push_back(std::move(launch));
    }
    plan.result = result;
    plan.eager = eager;
    if (plans_.size() >= capacity_) plans_.clear();
    plans_[key] = std::move(plan);
    return true;
  }

  size_t size() const { return plans_.size(); }
  void clear() { plans_.clear(); }

 private:
  const Plan* find(const py::tuple& leaves) const {
    std::string key;
    int device = -2;
    if (!make_key(leaves, key, device)) return nullptr;
    auto found = plans_.find(key);
    return found == plans_.end() ? nullptr : &found->second;
  }

  // Allocates the plan's buffers and launches its kernels with this call's pointers.
  std::vector<at::Tensor> execute(const Plan& plan, const py::tuple& leaves) {
    std::vector<at::Tensor> buffers;
    buffers.reserve(plan.buffers.size());
    for (const at::Tensor& meta : plan.buffers) {
      buffers.push_back(at::empty_strided(
          meta.sizes(), meta.strides(),
          at::TensorOptions().dtype(meta.scalar_type()).device(plan.device)));
    }
    void* stream = nullptr;
#ifdef PORTKIT_WITH_CUDA
    if (plan.device.is_cuda()) stream = c10::cuda::getCurrentCUDAStream(plan.device.index()).stream();
#endif
    for (const Launch& launch : plan.launches) {
      std::vector<uint64_t> params = launch.params;
      for (const auto& [slot, ref] : launch.pointers) {
        const at::Tensor& tensor =
            ref >= 0 ? THPVariable_Unpack(PyTuple_GET_ITEM(leaves.ptr(), ref))
                     : buffers[static_cast<size_t>(-1 - ref)];
        params[slot] = reinterpret_cast<uint64_t>(tensor.data_ptr());
      }
      std::vector<void*> arguments(params.size());
      for (size_t i = 0; i < params.size(); ++i) arguments[i] = &params[i];
      this->launch(launch, plan.device, stream, arguments.data());
    }
    return buffers;
  }

  void launch(const Launch& launch, c10::Device device, void* stream, void** arguments) {
    auto call = [&]() {
      return launch_kernel_(launch.function, launch.grid[0], launch.grid[1], launch.grid[2],
                            launch.block[0], launch.block[1], launch.block[2], launch.shared,
                            stream, arguments, nullptr);
    };
    int error = call();
#ifdef PORTKIT_WITH_CUDA
    if (error == kInvalidContext && device.is_cuda()) {
      // A thread where no context is current yet: make the device's primary one current.
      c10::cuda::CUDAGuard guard(device.index());
      error = call();
    }
#endif
    if (error != 0) {
      const char* name = nullptr;
      if (error_name_ == nullptr || error_name_(error, &name) != 0 || name == nullptr) {
        name = "unknown error";
      }
      throw std::runtime_error(std::string("cuLaunchKernel failed: ") + name);
    }
  }

  static py::object build(const py::object& node, const py::tuple& leaves,
                          const std::vector<at::Tensor>& buffers) {
    PyObject* raw = node.ptr();
    if (PyLong_CheckExact(raw)) {
      long long ref = PyLong_AsLongLong(raw);
      if (ref >= 0) return leaves[static_cast<size_t>(ref)];
      return py::reinterpret_steal<py::object>(
          THPVariable_Wrap(buffers[static_cast<size_t>(-1 - ref)]));
    }
    if (raw == Py_None) return py::none();
    bool is_tuple = PyTuple_CheckExact(raw);
    py::sequence items = py::reinterpret_borrow<py::sequence>(node);
    size_t count = py::len(items);
    if (is_tuple) {
      py::tuple out(count);
      for (size_t i = 0; i < count; ++i) out[i] = build(items[i], leaves, buffers);
      return std::move(out);
    }
    py::list out(count);
    for (size_t i = 0; i < count; ++i) out[i] = build(items[i], leaves, buffers);
    return std::move(out);
  }

  LaunchKernel launch_kernel_;
  ErrorName error_name_;
  size_t capacity_;
  py::object functorch_level_;
  std::unordered_map<std::string, Plan> plans_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Replayer>(m, "Replayer")
      .def(py::init<uintptr_t, uintptr_t, size_t, py::object>())
      .def("key", &Replayer::key)
      .def("run", &Replayer::run)
      .def("run_eager", &Replayer::run_eager)
      .def("add", &Replayer::add)
      .def("size", &Replayer::size)
      .def("clear", &Replayer::clear);
}
