// The compiled replayer: the per-call half of replaying.py in C++ (prepared.py does the
// same in Python; the CPU tests exercise both).
//
// run(leaves) keys the call by its leaves' metadata (dtype, device, sizes, strides of
// each tensor; type and bits of each scalar), and on a hit allocates the recorded
// buffers with torch's caching allocator, launches the recorded kernels with the data
// pointers of this call on torch's current stream, and builds the result. A miss
// returns None and the caller runs the launcher.
//
// run_eager(leaves) is portkit.load's whole plain-eager call. Where a gradient is wanted
// and set_backward gave the op's backward replayer, the replayed outputs get a C++
// autograd node of ours (ReplayNode, below) whose backward replays the backward's
// recording, and runs the op's Python backward where it cannot.
//
// OpKernels registers C++ kernels for the registered op itself (torch.ops.<ns>.<op>): a
// backend kernel that replays a recorded signature from the dispatcher's stack, with no
// Python, and an Autograd kernel that redispatches below autograd in C++ where no
// gradient is wanted; each calls the op's Python kernel it stands in front of otherwise.
//
// Built without PORTKIT_WITH_CUDA (a CPU build of torch) it replays CPU tensors with no
// stream: that is how the CPU tests exercise this file, with a launch function of theirs.
#include <Python.h>
#include <pybind11/pybind11.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable_info.h>
#include <torch/library.h>
#ifdef PORTKIT_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
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
  // The same as references, for the op's backend kernel (OpKernels): set where it is
  // one reference or a tuple of them.
  std::vector<int64_t> eager_refs;
  // For the autograd node: the saved tensors' references (empty: no node for this
  // signature) and the outputs' (buffers all, each once).
  std::vector<int64_t> saved;
  std::vector<int64_t> outputs;
};

class Replayer;

// How a replayed forward's backward runs (set_backward): the backward's replayer, and
// the op's Python backward for what that cannot replay. Nodes share it with the forward
// replayer and may outlive it, dying on an autograd thread: it takes the GIL to let go.
struct Backward {
  std::string name;
  std::vector<bool> grads;  // per input: does backward give a gradient there
  py::object structure;     // prepared.flatten's structure string of (saved, *grads)
  py::object owner;         // the backward's Replayer, kept alive
  Replayer* replayer = nullptr;
  py::object fallback;      // (saved, *grads) -> a gradient or None per input

  ~Backward() {
    if (!Py_IsInitialized()) {
      structure.release(), owner.release(), fallback.release();  // leak at exit
      return;
    }
    py::gil_scoped_acquire gil;
    structure = py::object(), owner = py::object(), fallback = py::object();
  }
};

// The autograd node of a replayed call (what save_for_backward and a Python Function's
// node do, in C++): saved tensors checked against their versions, gradients in input
// order, zeros for an output without one, a backward that replays, and the Python
// backward (once_differentiable there) where it cannot or a graph of it is wanted.
struct ReplayNode : public torch::autograd::Node {
  explicit ReplayNode(std::shared_ptr<Backward> backward) : backward_(std::move(backward)) {}
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override;
  std::string name() const override { return backward_->name + "Backward"; }
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& saved : saved_) saved.reset_data();
  }

  std::shared_ptr<Backward> backward_;
  std::vector<torch::autograd::SavedVariable> saved_;
  std::vector<torch::autograd::VariableInfo> outputs_;
};

// torch holds autograd nodes in std::shared_ptr up to 2.12 and in c10::intrusive_ptr
// from 2.13 (Edge::function says which): a node is made the way this torch holds them.
using NodePtr = decltype(torch::autograd::Edge::function);
template <typename Ptr>
struct NodeMaker;
template <typename N>
struct NodeMaker<std::shared_ptr<N>> {
  template <typename T, typename... A>
  static std::shared_ptr<T> make(A&&... args) {
    return std::make_shared<T>(std::forward<A>(args)...);
  }
};
template <typename N>
struct NodeMaker<c10::intrusive_ptr<N>> {
  template <typename T, typename... A>
  static c10::intrusive_ptr<T> make(A&&... args) {
    return c10::make_intrusive<T>(std::forward<A>(args)...);
  }
};

template <typename T>
void append(std::string& key, T value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

bool append_tensor(const at::Tensor& tensor, std::string& key, int& device);

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
  // A plain Tensor or Parameter only, as in prepared.py: a subclass may make its outputs
  // its own type, and fake, functorch and other wrapper tensors dispatch through Python
  // or have no storage; the launcher decides for those.
  if (!THPVariable_CheckExact(leaf)) return false;
  return append_tensor(THPVariable_Unpack(leaf), key, device);
}

// A tensor's part of the key (both kinds of leaves): false for one without storage or
// dispatching through Python, or on another device than the call's first tensor.
bool append_tensor(const at::Tensor& tensor, std::string& key, int& device) {
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

// The key of a dispatcher call's arguments: the bytes append_leaf writes for the Python
// values the op's Python kernel would get for them (the dispatcher has already made a
// Python int for a float argument a float, a bool for an int argument an int).
bool make_key(c10::ArrayRef<c10::IValue> args, std::string& key, int& device) {
  key.reserve(64);
  for (const c10::IValue& value : args) {
    if (value.isNone()) {
      key.push_back('n');
    } else if (value.isBool()) {
      key.push_back(value.toBool() ? 'B' : 'b');
    } else if (value.isInt()) {
      key.push_back('i');
      append(key, static_cast<long long>(value.toInt()));
    } else if (value.isDouble()) {
      key.push_back('f');
      append(key, value.toDouble());
    } else if (value.isString()) {
      const std::string& text = value.toStringRef();
      key.push_back('s');
      append(key, static_cast<int64_t>(text.size()));
      key.append(text);
    } else if (!value.isTensor() || !append_tensor(value.toTensor(), key, device)) {
      return false;
    }
  }
  return true;
}

// Takes ``lock`` without holding the GIL while it waits: a thread holding the lock may
// need the GIL (a launch function written in Python, in the CPU tests).
template <typename Lock>
void lock_releasing_gil(Lock& lock) {
  if (lock.try_lock()) return;
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release release;
    lock.lock();
  } else {
    lock.lock();
  }
}

using SharedLock = std::shared_lock<std::shared_mutex>;
using UniqueLock = std::unique_lock<std::shared_mutex>;

// Input ``i`` of a call whose leaves are Python objects (Replayer::execute's ``input``).
struct PythonInputs {
  const py::tuple& leaves;
  const at::Tensor& operator()(size_t i) const {
    return THPVariable_Unpack(PyTuple_GET_ITEM(leaves.ptr(), i));
  }
};

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
    SharedLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    const Plan* plan = find(leaves);
    if (plan == nullptr) return py::none();
    return build(plan->result, leaves, execute(*plan, PythonInputs{leaves}));
  }

  // The op's backend kernel on a hit (OpKernels): the stack's arguments replaced by the
  // op's outputs, an input or a tensor already returned cloned (as the Python kernel's
  // _unalias does); false (the stack untouched) where the signature was not recorded
  // with an eager result of ``returns`` tensors. Runs without the GIL.
  bool run_boxed(c10::Stack& stack, size_t arguments, size_t returns) {
    auto args = torch::jit::last(stack, arguments);
    std::string key;
    int device = -2;
    if (!make_key(args, key, device)) return false;
    SharedLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    auto found = plans_.find(key);
    if (found == plans_.end()) return false;
    const Plan& plan = found->second;
    if (plan.eager_refs.size() != returns) return false;
    std::vector<at::Tensor> buffers =
        execute(plan, [&](size_t i) -> const at::Tensor& { return args[i].toTensor(); });
    std::vector<at::Tensor> outputs;
    outputs.reserve(returns);
    std::vector<bool> returned(buffers.size(), false);
    for (int64_t ref : plan.eager_refs) {
      if (ref >= 0) {
        outputs.push_back(args[static_cast<size_t>(ref)].toTensor().clone());
      } else {
        size_t index = static_cast<size_t>(-1 - ref);
        outputs.push_back(returned[index] ? buffers[index].clone() : buffers[index]);
        returned[index] = true;
      }
    }
    torch::jit::drop(stack, arguments);
    for (auto& out : outputs) stack.emplace_back(std::move(out));
    return true;
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
    bool wanted = false;
    for (const auto& leaf : leaves) {
      PyObject* raw = leaf.ptr();
      if (grad && THPVariable_CheckExact(raw)) {
        const at::Tensor& tensor = THPVariable_Unpack(raw);
        if (tensor.requires_grad()) {
          // autograd must see the call: through our node, or the caller's Function
          if (backward_ == nullptr) return py::none();
          wanted = true;
        }
        if (tensor._fw_grad(/*level=*/0).defined()) return py::none();  // forward AD
      }
    }
    SharedLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    const Plan* plan = find(leaves);
    if (plan == nullptr || plan->eager.is_none()) return py::none();
    if (!wanted) return build(plan->eager, leaves, execute(*plan, PythonInputs{leaves}));
    if (plan->outputs.empty()) return py::none();  // no node for this signature
    return differentiable(*plan, leaves);
  }

  // Where a gradient is wanted, run_eager's replays get a ReplayNode whose backward
  // replays with ``backward`` (another Replayer) and calls ``fallback`` where it cannot.
  void set_backward(py::object backward, const std::string& name, std::vector<bool> grads,
                    py::object structure, py::object fallback) {
    auto spec = std::make_shared<Backward>();
    spec->name = name;
    spec->grads = std::move(grads);
    spec->structure = std::move(structure);
    spec->replayer = backward.cast<Replayer*>();
    spec->owner = std::move(backward);
    spec->fallback = std::move(fallback);
    backward_ = std::move(spec);
  }

  // The backward's replay of (saved, *grads), as run() would do it; None on a miss.
  py::object run_backward(const std::vector<at::Tensor>& saved,
                          const std::vector<at::Tensor>& grads, const py::object& structure) {
    py::tuple leaves(1 + saved.size() + grads.size());
    leaves[0] = structure;
    size_t i = 1;
    for (const auto& t : saved) leaves[i++] = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
    for (const auto& t : grads) leaves[i++] = py::reinterpret_steal<py::object>(THPVariable_Wrap(t));
    return run(leaves);
  }


  // Remembers a recording under the key of its leaves; false where they cannot be keyed.
  // ``device``: where the buffers go, as torch writes it ("cuda:0", "cpu").
  bool add(const py::tuple& leaves, const std::string& device, const py::list& buffers,
           const py::list& launches, const py::object& result, const py::object& eager,
           const py::object& saved) {
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
    if (PyLong_CheckExact(eager.ptr())) {
      plan.eager_refs.push_back(eager.cast<int64_t>());
    } else if (PyTuple_CheckExact(eager.ptr())) {
      plan.eager_refs = eager.cast<std::vector<int64_t>>();
    }
    if (!saved.is_none()) plan_node(plan, saved.cast<std::vector<int64_t>>());
    UniqueLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    if (plans_.size() >= capacity_) plans_.clear();
    plans_[key] = std::move(plan);
    return true;
  }

  size_t size() {
    SharedLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    return plans_.size();
  }
  void clear() {
    UniqueLock lock(plans_mutex_, std::defer_lock);
    lock_releasing_gil(lock);
    plans_.clear();
  }

 private:
  // A node is made only where every output (eager_refs, set first) is a buffer of its own
  // (an output that is an input, or one tensor twice, needs a Python Function's views).
  static void plan_node(Plan& plan, std::vector<int64_t> saved) {
    std::vector<bool> seen(plan.buffers.size(), false);
    for (int64_t ref : plan.eager_refs) {
      if (ref >= 0 || seen[static_cast<size_t>(-1 - ref)]) return;
      seen[static_cast<size_t>(-1 - ref)] = true;
    }
    for (int64_t ref : saved) {
      if (ref < 0 && -1 - ref >= static_cast<int64_t>(plan.buffers.size())) return;
    }
    plan.saved = std::move(saved);
    plan.outputs = plan.eager_refs;
  }

  // The replay with a ReplayNode as its outputs' grad_fn, saving what the forward saved.
  py::object differentiable(const Plan& plan, const py::tuple& leaves) {
    namespace ag = torch::autograd;
    std::vector<at::Tensor> buffers = execute(plan, PythonInputs{leaves});
    auto node = NodeMaker<NodePtr>::make<ReplayNode>(backward_);
    const auto& grads = backward_->grads;
    ag::edge_list edges;
    edges.reserve(leaves.size());
    for (size_t i = 0; i < leaves.size(); ++i) {
      PyObject* raw = PyTuple_GET_ITEM(leaves.ptr(), i);
      bool tensor = THPVariable_Check(raw);
      if (tensor && i < grads.size() && grads[i]) {
        edges.push_back(ag::impl::gradient_edge(THPVariable_Unpack(raw)));
      } else {
        edges.emplace_back();
      }
    }
    node->set_next_edges(std::move(edges));
    for (int64_t ref : plan.outputs) {
      at::Tensor& out = buffers[static_cast<size_t>(-1 - ref)];
      if (ag::isDifferentiableType(out.scalar_type())) {
        ag::set_history(out, node);
      } else {
        node->add_input_metadata(ag::Node::undefined_input());
      }
      node->outputs_.emplace_back(out);
    }
    node->saved_.reserve(plan.saved.size());
    for (int64_t ref : plan.saved) {
      const at::Tensor& tensor =
          ref >= 0 ? THPVariable_Unpack(PyTuple_GET_ITEM(leaves.ptr(), ref))
                   : buffers[static_cast<size_t>(-1 - ref)];
      bool output = tensor.grad_fn().get() == node.get();
      node->saved_.emplace_back(tensor, output);
    }
    return build(plan.eager, leaves, buffers);
  }

  const Plan* find(const py::tuple& leaves) const {
    std::string key;
    int device = -2;
    if (!make_key(leaves, key, device)) return nullptr;
    auto found = plans_.find(key);
    return found == plans_.end() ? nullptr : &found->second;
  }

  // Allocates the plan's buffers and launches its kernels with this call's pointers
  // (``input(i)``: the call's tensor at leaf i).
  template <typename Input>
  std::vector<at::Tensor> execute(const Plan& plan, const Input& input) {
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
            ref >= 0 ? input(static_cast<size_t>(ref)) : buffers[static_cast<size_t>(-1 - ref)];
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
  std::shared_ptr<Backward> backward_;
  // Guards plans_: the op's backend kernel reads them without the GIL.
  std::shared_mutex plans_mutex_;
  std::unordered_map<std::string, Plan> plans_;
};

// A gradient per input (undefined where none) from a backward's result, or false where
// the result is not one: a tuple or list with one item per input, tensors or None.
bool gradients(const py::object& result, const std::vector<bool>& wanted,
               torch::autograd::variable_list& out) {
  if (!PyTuple_Check(result.ptr()) && !PyList_Check(result.ptr())) return false;
  py::sequence items = py::reinterpret_borrow<py::sequence>(result);
  if (py::len(items) != wanted.size()) return false;
  out.assign(wanted.size(), at::Tensor());
  for (size_t i = 0; i < wanted.size(); ++i) {
    py::object item = items[i];
    if (!wanted[i] || item.is_none()) continue;
    if (!THPVariable_Check(item.ptr())) return false;
    out[i] = THPVariable_Unpack(item.ptr());
  }
  return true;
}

torch::autograd::variable_list ReplayNode::apply(torch::autograd::variable_list&& grads) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<at::Tensor> saved;
  saved.reserve(saved_.size());
  for (const auto& s : saved_) saved.push_back(s.unpack(getptr()));  // version checks
  bool graph = false;  // a graph of the backward wanted: the Python backward refuses it
  at::OptionalDeviceGuard guard;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) {
      grads[i] = outputs_[i].zeros(guard);  // as a Function's materialised gradients
    } else {
      graph = graph || (c10::GradMode::is_enabled() && grads[i].requires_grad());
      grads[i] = grads[i].contiguous();  // kernels want C order
    }
  }
  py::gil_scoped_acquire gil;
  torch::autograd::variable_list out;
  try {
    if (!graph) {
      py::object replayed = backward_->replayer->run_backward(saved, grads, backward_->structure);
      if (!replayed.is_none() && gradients(replayed, backward_->grads, out)) return out;
    }
    py::tuple args(1 + grads.size());
    py::tuple saved_tuple(saved.size());
    for (size_t i = 0; i < saved.size(); ++i) {
      saved_tuple[i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(saved[i]));
    }
    args[0] = saved_tuple;
    for (size_t i = 0; i < grads.size(); ++i) {
      args[1 + i] = py::reinterpret_steal<py::object>(THPVariable_Wrap(grads[i]));
    }
    py::object result = backward_->fallback(*args);
    if (!gradients(result, std::vector<bool>(backward_->grads.size(), true), out)) {
      throw std::runtime_error("op " + backward_->name +
                               ": backward gave a gradient that is neither a tensor nor None");
    }
  } catch (py::error_already_set& error) {
    error.restore();  // the Python error itself (an OpDefinitionError, say) reaches the caller
    python_error err;
    err.persist();
    throw std::move(err);
  }
  return out;
}

// What the op's C++ kernels did, for tests and profiles: replays by the backend kernel,
// its calls of the Python kernel, the Autograd kernel's redispatches below autograd,
// its autograd nodes, and its calls of the Python Autograd kernel.
struct Counts {
  std::atomic<int64_t> replayed{0}, backend_python{0}, below_autograd{0}, nodes{0},
      autograd_python{0};
};

// The op's backend kernel: a recorded signature replays; any other call goes to the
// Python kernel (CompositeExplicitAutograd), which records, checks and raises as always.
struct BackendKernel final : c10::OperatorKernel {
  BackendKernel(Replayer* replayer, std::shared_ptr<Counts> counts)
      : replayer_(replayer), counts_(std::move(counts)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, c10::Stack* stack) {
    const auto& schema = op.schema();
    if (replayer_->run_boxed(*stack, schema.arguments().size(), schema.returns().size())) {
      ++counts_->replayed;
      return;
    }
    ++counts_->backend_python;
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd, *stack);
  }

  Replayer* replayer_;
  std::shared_ptr<Counts> counts_;
};

// A dispatcher argument as the Python kernel would get it; nullptr where it has no such
// form here (the caller then leaves the call to Python).
PyObject* to_python(const c10::IValue& value) {
  if (value.isTensor()) return THPVariable_Wrap(value.toTensor());
  if (value.isNone()) Py_RETURN_NONE;
  if (value.isBool()) return PyBool_FromLong(value.toBool());
  if (value.isInt()) return PyLong_FromLongLong(value.toInt());
  if (value.isDouble()) return PyFloat_FromDouble(value.toDouble());
  return nullptr;
}

// The op's Autograd kernel (at the backend's autograd key, in front of the Python one at
// the Autograd alias): no gradient wanted, the redispatch below autograd the Python
// kernel makes, in C++; a gradient wanted in plain eager, the replay with its ReplayNode
// (run_eager); anything else (a mode, functorch, compiling, a miss), the Python kernel.
struct AutogradKernel final : c10::OperatorKernel {
  AutogradKernel(Replayer* replayer, bool has_backward, py::object is_compiling,
                 std::shared_ptr<Counts> counts)
      : replayer_(replayer),
        has_backward_(has_backward),
        is_compiling_(std::move(is_compiling)),
        counts_(std::move(counts)) {}

  ~AutogradKernel() override {
    if (!Py_IsInitialized()) {
      is_compiling_.release();  // leak at exit
      return;
    }
    py::gil_scoped_acquire gil;
    is_compiling_ = py::object();
  }

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys, c10::Stack* stack) {
    size_t arguments = op.schema().arguments().size();
    bool wanted = false;
    if (has_backward_ && c10::GradMode::is_enabled()) {
      for (const c10::IValue& value : torch::jit::last(*stack, arguments)) {
        wanted = wanted || (value.isTensor() && value.toTensor().requires_grad());
      }
    }
    if (!wanted) {
      ++counts_->below_autograd;
      at::AutoDispatchBelowAutograd guard;
      op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
      return;
    }
    if (differentiable(*stack, arguments, op.schema().returns().size())) {
      ++counts_->nodes;
      return;
    }
    ++counts_->autograd_python;
    op.callBoxedForDispatchKey(c10::DispatchKey::Autograd, *stack);
  }

  // run_eager on the stack's arguments: true with the outputs (carrying the node) on the
  // stack in place of the arguments; false, the stack untouched, where it declines.
  bool differentiable(c10::Stack& stack, size_t arguments, size_t returns) {
    py::gil_scoped_acquire gil;
    if (is_compiling_().cast<bool>()) return false;
    auto args = torch::jit::last(stack, arguments);
    py::tuple leaves(arguments);
    for (size_t i = 0; i < arguments; ++i) {
      PyObject* leaf = to_python(args[i]);
      if (leaf == nullptr) return false;
      PyTuple_SET_ITEM(leaves.ptr(), i, leaf);
    }
    py::object result;
    try {
      result = replayer_->run_eager(leaves);
    } catch (py::error_already_set& error) {
      error.restore();
      python_error err;
      err.persist();
      throw std::move(err);
    }
    // The node's plans return buffers of their own only (plan_node): no alias to clone.
    std::vector<at::Tensor> outputs;
    if (THPVariable_Check(result.ptr())) {
      outputs.push_back(THPVariable_Unpack(result.ptr()));
    } else if (PyTuple_CheckExact(result.ptr())) {
      for (const auto& item : py::reinterpret_borrow<py::tuple>(result)) {
        if (!THPVariable_Check(item.ptr())) return false;
        outputs.push_back(THPVariable_Unpack(item.ptr()));
      }
    }
    if (outputs.size() != returns) return false;
    torch::jit::drop(stack, arguments);
    for (auto& out : outputs) stack.emplace_back(std::move(out));
    return true;
  }

  Replayer* replayer_;
  bool has_backward_;
  py::object is_compiling_;
  std::shared_ptr<Counts> counts_;
};

// The C++ kernels of op ``ns::name`` for tensors on ``device`` ("cpu" or "cuda"), over a
// forward Replayer: registered while this object lives (a torch::Library of kind IMPL),
// deregistered when it is destroyed, which gives the op back to its Python kernels.
class OpKernels {
 public:
  OpKernels(const std::string& ns, const std::string& name, const std::string& device,
            py::object forward, bool has_backward, py::object is_compiling)
      : owner_(forward), counts_(std::make_shared<Counts>()) {
    c10::DispatchKey backend = c10::DispatchKey::CPU, autograd = c10::DispatchKey::AutogradCPU;
    if (device.rfind("cuda", 0) == 0) {
      backend = c10::DispatchKey::CUDA, autograd = c10::DispatchKey::AutogradCUDA;
    } else if (device != "cpu") {
      throw std::invalid_argument("no C++ kernels for device " + device);
    }
    Replayer* replayer = forward.cast<Replayer*>();
    library_ = std::make_unique<torch::Library>(torch::Library::IMPL, ns, std::nullopt,
                                                __FILE__, __LINE__);
    library_->impl(name.c_str(),
                   torch::dispatch(backend, torch::CppFunction::makeFromBoxedFunctor(
                                                std::make_unique<BackendKernel>(replayer, counts_))));
    library_->impl(name.c_str(),
                   torch::dispatch(autograd, torch::CppFunction::makeFromBoxedFunctor(
                                                 std::make_unique<AutogradKernel>(
                                                     replayer, has_backward,
                                                     std::move(is_compiling), counts_))));
  }

  py::dict counts() const {
    py::dict out;
    out["replayed"] = counts_->replayed.load();
    out["backend_python"] = counts_->backend_python.load();
    out["below_autograd"] = counts_->below_autograd.load();
    out["nodes"] = counts_->nodes.load();
    out["autograd_python"] = counts_->autograd_python.load();
    return out;
  }

 private:
  py::object owner_;  // the forward Replayer, kept alive while its kernels are registered
  std::shared_ptr<Counts> counts_;
  std::unique_ptr<torch::Library> library_;  // declared last: destroyed first
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Replayer>(m, "Replayer")
      .def(py::init<uintptr_t, uintptr_t, size_t, py::object>())
      .def("key", &Replayer::key)
      .def("run", &Replayer::run)
      .def("run_eager", &Replayer::run_eager)
      .def("set_backward", &Replayer::set_backward)
      .def("add", &Replayer::add)
      .def("size", &Replayer::size)
      .def("clear", &Replayer::clear);
  py::class_<OpKernels>(m, "OpKernels")
      .def(py::init<const std::string&, const std::string&, const std::string&, py::object,
                    bool, py::object>())
      .def("counts", &OpKernels::counts);
}
