// kgate._core: the C++ core seen from Python.
//
// What crosses the boundary and how:
// - tensors cross by DLPack without copies in both directions: a HostArray is exported as a read-write
//   view (`numpy.from_dlpack(a)` aliases its bytes), and the comparison helpers take any DLPack-capable
//   CPU array (numpy, torch.cpu) as an nb::ndarray view of the caller's memory;
// - Target is the engine's seam (kgate/target.hpp). A Python subclass of kgate._core.Target is a real
//   kgate::Target to the C++ side (a nanobind trampoline), so the C++ gates drive Python candidates
//   unchanged; kgate.target.WorkerTarget is the subclass that runs the candidate in a worker process;
// - drive_target is a small C++ driver over any Target (alloc, write, call, gather, guards): the same
//   sequence of calls a gate makes, used by the tests to prove the seam end to end until verify() binds.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>
#include <nanobind/trampoline.h>

#include "kgate/contract.hpp"
#include "kgate/dtype.hpp"
#include "kgate/oracle.hpp"
#include "kgate/report.hpp"
#include "kgate/verify.hpp"
#include "kgate/rng.hpp"
#include "kgate/sanitizer_log.hpp"
#include "kgate/source.hpp"
#include "kgate/target.hpp"
#include "kgate/targets.hpp"
#include "kgate/tensor.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace kgate {
namespace {

// ---- DLPack views --------------------------------------------------------------------------------------

nb::dlpack::dtype to_nb_dtype(DType t) {
  const DLDataType d = to_dlpack(t);
  nb::dlpack::dtype out;
  out.code = d.code;
  out.bits = d.bits;
  out.lanes = d.lanes;
  return out;
}

DType from_nb_dtype(nb::dlpack::dtype d) {
  DLDataType dl;
  dl.code = d.code;
  dl.bits = d.bits;
  dl.lanes = d.lanes;
  if (auto t = from_dlpack(dl)) return *t;
  throw std::invalid_argument("kgate has no dtype for DLPack code " + std::to_string(d.code) + " bits " +
                              std::to_string(d.bits));
}

using CpuArray = nb::ndarray<nb::ro, nb::device::cpu>;

// A view of a HostArray's bytes that keeps the owning Python object alive: no copy.
nb::ndarray<> host_view(nb::handle owner, HostArray& a) {
  std::vector<size_t> shape(a.shape().begin(), a.shape().end());
  return nb::ndarray<>(a.data(), shape.size(), shape.data(), owner, nullptr, to_nb_dtype(a.dtype()),
                       nb::device::cpu::value, 0);
}

// The byte offset of element `flat` (row-major) of a strided view.
std::int64_t element_offset(const CpuArray& a, std::int64_t flat) {
  std::int64_t off = 0;
  for (size_t d = a.ndim(); d-- > 0;) {
    const std::int64_t extent = static_cast<std::int64_t>(a.shape(d));
    const std::int64_t i = extent > 0 ? flat % extent : 0;
    flat = extent > 0 ? flat / extent : 0;
    off += i * a.stride(d);
  }
  return off * static_cast<std::int64_t>(a.itemsize());
}

// Whether a view's elements lie densely in row-major order (strides in elements; extent-1 dims are free), so
// it can be read with one memcpy instead of an offset computation per element.
bool is_row_major_dense(const CpuArray& a) {
  std::int64_t want = 1;
  for (size_t d = a.ndim(); d-- > 0;) {
    const std::int64_t extent = static_cast<std::int64_t>(a.shape(d));
    if (extent == 0) return true;
    if (extent != 1 && a.stride(d) != want) return false;
    want *= extent;
  }
  return true;
}

std::int64_t element_count(const CpuArray& a) {
  std::int64_t n = 1;
  for (size_t d = 0; d < a.ndim(); ++d) n *= static_cast<std::int64_t>(a.shape(d));
  return n;
}

// First flat index where two arrays differ bitwise, or -1. Reads both in place (no copies).
std::int64_t first_bitwise_difference(const CpuArray& a, const CpuArray& b) {
  if (a.ndim() != b.ndim()) throw std::invalid_argument("first_bitwise_difference: ranks differ");
  for (size_t d = 0; d < a.ndim(); ++d)
    if (a.shape(d) != b.shape(d)) throw std::invalid_argument("first_bitwise_difference: shapes differ");
  if (a.itemsize() != b.itemsize()) throw std::invalid_argument("first_bitwise_difference: element sizes differ");
  const auto* pa = static_cast<const unsigned char*>(a.data());
  const auto* pb = static_cast<const unsigned char*>(b.data());
  const std::int64_t n = element_count(a);
  if (is_row_major_dense(a) && is_row_major_dense(b)) {
    const size_t es = a.itemsize();
    if (n == 0 || std::memcmp(pa, pb, static_cast<size_t>(n) * es) == 0) return -1;
    for (std::int64_t i = 0; i < n; ++i)
      if (std::memcmp(pa + i * es, pb + i * es, es) != 0) return i;
    return -1;
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (std::memcmp(pa + element_offset(a, i), pb + element_offset(b, i), a.itemsize()) != 0) return i;
  return -1;
}

// Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf (the classes the tolerance-free gates compare).
std::vector<std::uint8_t> nonfinite_classes(const CpuArray& a) {
  const DType t = from_nb_dtype(a.dtype());
  const auto* p = static_cast<const std::byte*>(a.data());
  const std::int64_t n = element_count(a);
  std::vector<std::uint8_t> out(static_cast<size_t>(n), 0);
  if (!is_float(t)) return out;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = load_f64(p + element_offset(a, i), t);
    out[static_cast<size_t>(i)] = std::isnan(v) ? 1 : std::isinf(v) ? (v > 0 ? 2 : 3) : 0;
  }
  return out;
}

HostArray host_from_array(const CpuArray& a) {
  const DType t = from_nb_dtype(a.dtype());
  Shape shape;
  for (size_t d = 0; d < a.ndim(); ++d) shape.push_back(static_cast<std::int64_t>(a.shape(d)));
  HostArray out(t, shape);
  const auto* p = static_cast<const std::byte*>(a.data());
  if (is_row_major_dense(a)) {
    if (out.nbytes() > 0) std::memcpy(out.data(), p, out.nbytes());
    return out;
  }
  for (std::int64_t i = 0; i < out.numel(); ++i)
    std::memcpy(out.data() + i * size_of(t), p + element_offset(a, i), size_of(t));
  return out;
}

// ---- Target trampoline ---------------------------------------------------------------------------------

// Any bytes-like object (bytes, bytearray, a contiguous numpy array, a memoryview), copied once.
std::vector<std::byte> to_bytes(nb::handle obj) {
  if (nb::isinstance<nb::bytes>(obj)) {
    nb::bytes b = nb::borrow<nb::bytes>(obj);
    const auto* p = static_cast<const std::byte*>(static_cast<const void*>(b.c_str()));
    return std::vector<std::byte>(p, p + b.size());
  }
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();  // not a contiguous buffer: whatever bytes() makes of it
    return to_bytes(nb::module_::import_("builtins").attr("bytes")(obj));
  }
  const auto* p = static_cast<const std::byte*>(view.buf);
  std::vector<std::byte> out(p, p + view.len);
  PyBuffer_Release(&view);
  return out;
}

nb::bytes from_bytes(std::span<const std::byte> data) { return nb::bytes(data.data(), data.size()); }

// Looks a pure virtual up on the Python subclass and calls it with the GIL held.
#define KGATE_PY_CALL(name, ...)                                                                    \
  nb::gil_scoped_acquire kgate_gil;                                                                 \
  nanobind::detail::ticket kgate_ticket(nb_trampoline, name, nanobind::detail::str_hash(name), true); \
  nb::object kgate_result = nb_trampoline.base().attr(kgate_ticket.key)(__VA_ARGS__)

class PyTarget : public Target {
 public:
  NB_TRAMPOLINE(Target);

  std::string describe() const override {
    KGATE_PY_CALL("describe");
    return nb::cast<std::string>(kgate_result);
  }
  DLDeviceType device() const override {
    KGATE_PY_CALL("device");
    return static_cast<DLDeviceType>(nb::cast<int>(kgate_result));
  }
  BufferId alloc(std::size_t bytes) override {
    KGATE_PY_CALL("alloc", bytes);
    return nb::cast<BufferId>(kgate_result);
  }
  void release(BufferId id) override { KGATE_PY_CALL("release", id); }
  // The payload is lent to Python as a read-only memoryview for the length of the call, not copied into a
  // bytes object (an input set of a large task is hundreds of MB, written once per case): the target sends
  // it on and must not keep it or any view made from it, which is checked after the call.
  void write(BufferId id, std::size_t offset, std::span<const std::byte> data) override {
    nb::gil_scoped_acquire gil;
    nb::object view = nb::steal(PyMemoryView_FromMemory(
        const_cast<char*>(reinterpret_cast<const char*>(data.data())), static_cast<Py_ssize_t>(data.size()), PyBUF_READ));
    if (!view.is_valid()) throw nb::python_error();
    {
      KGATE_PY_CALL("write", id, offset, view);
    }
    const bool kept = Py_REFCNT(view.ptr()) != 1 || reinterpret_cast<PyMemoryViewObject*>(view.ptr())->mbuf->exports != 1;
    view.attr("release")();  // whatever still refers to it can no longer read the engine's memory
    if (kept)
      throw std::logic_error("Target.write kept the payload it was lent (or a view of it) past the call; copy what "
                             "must be kept");
  }
  // Optional in Python: a target without fill() gets Target::fill (a write of the uniform payload).
  void fill(BufferId id, std::size_t offset, std::size_t bytes, std::byte value) override {
    nb::gil_scoped_acquire gil;
    nanobind::detail::ticket t(nb_trampoline, "fill", nanobind::detail::str_hash("fill"), false);
    if (!t.key.is_valid()) {
      Target::fill(id, offset, bytes, value);
      return;
    }
    nb_trampoline.base().attr(t.key)(id, offset, bytes, static_cast<unsigned>(value));
  }
  std::vector<std::byte> read(BufferId id, std::size_t offset, std::size_t bytes) override {
    KGATE_PY_CALL("read", id, offset, bytes);
    return to_bytes(kgate_result);
  }
  std::vector<GuardViolation> check_guards(BufferId id) override {
    KGATE_PY_CALL("check_guards", id);
    return nb::cast<std::vector<GuardViolation>>(kgate_result);
  }
  CallResult call(const CallRequest& request) override {
    KGATE_PY_CALL("call", request);
    CallResult& r = nb::cast<CallResult&>(kgate_result);
    if (Py_REFCNT(kgate_result.ptr()) == 1) return std::move(r);  // a fresh result only we hold: take its outputs
    return r;
  }
  void reset() override { KGATE_PY_CALL("reset"); }
  bool healthy() const override {
    KGATE_PY_CALL("healthy");
    return nb::cast<bool>(kgate_result);
  }
};

// A Python list of arrays (HostArray, or any CPU DLPack array such as numpy's) as HostArrays. Call with the
// GIL held. `list_owned`: the caller knows nothing in Python can reach the list but this call (by default:
// its only reference is the caller's).
std::vector<HostArray> to_host_arrays(nb::handle list, const char* what, std::optional<bool> list_owned = {}) {
  std::vector<HostArray> out;
  auto take = [&](nb::handle item, bool movable) {
    if (nb::isinstance<HostArray>(item)) {
      HostArray& a = nb::cast<HostArray&>(item);
      if (movable)
        out.push_back(std::move(a));
      else
        out.push_back(a);
    } else {
      CpuArray a;
      if (!nb::try_cast<CpuArray>(item, a))
        throw std::invalid_argument(std::string(what) + ": an item is neither a HostArray nor a CPU DLPack array");
      out.push_back(host_from_array(a));
    }
  };
  if (PyList_CheckExact(list.ptr())) {
    // A list only this call holds, of arrays only that list holds (a front-end's fresh results): nothing in
    // Python can see them again, so their bytes are moved rather than copied. Read by index: the items are
    // borrowed, so a count of 1 is the list's own reference (an iterator would hold a second one).
    const bool owned = list_owned.value_or(Py_REFCNT(list.ptr()) == 1);
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list.ptr()); ++k) {
      nb::handle item(PyList_GET_ITEM(list.ptr(), k));
      take(item, owned && Py_REFCNT(item.ptr()) == 1);
    }
    return out;
  }
  for (nb::handle item : list) take(item, false);
  return out;
}

// The engine's arrays lent to a Python callback for the length of one call, without copying them (an input
// set of a large task is hundreds of MB, and the oracle and reference runs see every set): a list of
// HostArray objects that refer to the engine's own. The callback reads them (DLPack, numpy()) and must not
// keep them or write to them; check_unkept() after the call enforces the first, since the engine frees them.
class LentArrays {
 public:
  explicit LentArrays(const std::vector<HostArray>& arrays) {
    for (const HostArray& a : arrays) list_.append(nb::cast(const_cast<HostArray*>(&a), nb::rv_policy::reference));
  }
  const nb::list& list() const { return list_; }
  // Throws where the callback kept the list or one of its arrays (a reference that would outlive the
  // engine's array).
  void check_unkept(const char* what) const {
    bool kept = Py_REFCNT(list_.ptr()) != 1;
    for (nb::handle item : list_) kept = kept || Py_REFCNT(item.ptr()) != 1;
    if (kept)
      throw OracleError(std::string(what) + " kept a reference to its input arrays past the call; they are the "
                        "engine's, lent for the call only: copy what must be kept");
  }

 private:
  nb::list list_;
};

nb::dict bindings_dict(const Bindings& b) {
  nb::dict d;
  for (const auto& [k, v] : b) d[nb::str(k.c_str())] = v;
  return d;
}

// An InputSource implemented in Python: describe() -> str, draw(bindings: dict, seed: int) -> list of arrays.
class PyInputSource : public InputSource {
 public:
  NB_TRAMPOLINE(InputSource, 2);

  std::string describe() const override {
    KGATE_PY_CALL("describe");
    return nb::cast<std::string>(kgate_result);
  }
  std::vector<HostArray> draw(const Bindings& b, std::uint64_t seed) override {
    nb::gil_scoped_acquire gil;
    try {
      nanobind::detail::ticket t(nb_trampoline, "draw", nanobind::detail::str_hash("draw"), true);
      nb::object res = nb_trampoline.base().attr(t.key)(bindings_dict(b), seed);
      return to_host_arrays(res, "InputSource.draw");
    } catch (const nb::python_error& e) {
      throw SourceError(e.what());  // converted while the GIL is held
    } catch (const nb::cast_error& e) {
      throw SourceError(std::string("InputSource.draw returned something that is not a list of arrays: ") + e.what());
    }
  }
};

// What drive_target returns: the outcome and each output as the target gathered it.
struct DriveResult {
  CallResult call;
  std::vector<std::vector<GuardViolation>> guards_after;  // per input buffer, checked after the call
};

// The sequence a gate runs against a target, written in C++ so the tests exercise the trampoline from the
// engine's side: each input in its own guarded buffer (written through Target::write), outputs in fresh
// buffers (poisoned as requested), one call, guards checked.
DriveResult drive_target(Target& target, const std::vector<HostArray>& inputs,
                         const std::vector<std::pair<DType, Shape>>& outputs, const std::vector<std::byte>& poison,
                         StreamMode stream) {
  Invocation inv;
  std::vector<BufferId> input_buffers;
  for (const HostArray& a : inputs) {
    const BufferId id = target.alloc(a.nbytes());
    target.write(id, 0, a.bytes());
    inv.inputs.push_back({id, Layout::dense(a.dtype(), a.shape())});
    input_buffers.push_back(id);
  }
  for (const auto& [t, s] : outputs) {
    const BufferId id = target.alloc(static_cast<std::size_t>(numel(s)) * size_of(t));
    inv.outputs.push_back({id, Layout::dense(t, s)});
  }
  CallRequest req;
  req.invocations.push_back(inv);
  req.poison = poison;
  req.stream = stream;
  DriveResult out;
  out.call = target.call(req);
  if (target.healthy()) {
    for (BufferId id : input_buffers) out.guards_after.push_back(target.check_guards(id));
    for (const TensorArg& a : inv.inputs) target.release(a.buffer);
    for (const TensorArg& a : inv.outputs) target.release(a.buffer);
  }
  return out;
}

// A gate record as the report's JSON gives it (to_json(GateResult)), back as a GateResult: gate, verdict,
// summary, cases, finding, error_ratio (a number, None or "inf"), counted and out_of_domain are read, the
// rest ignored. `what` names the caller in errors.
GateResult gate_from_record(nb::handle h, const char* what) {
  if (!nb::isinstance<nb::dict>(h)) throw nb::type_error((std::string(what) + ": each gate record must be a dict").c_str());
  nb::dict d = nb::borrow<nb::dict>(h);
  GateResult g;
  g.gate = nb::cast<std::string>(d["gate"]);
  const std::string verdict = nb::cast<std::string>(d["verdict"]);
  bool known = false;
  for (Verdict v : {Verdict::pass, Verdict::fail, Verdict::refused, Verdict::skip, Verdict::crash,
                    Verdict::timeout, Verdict::error})
    if (verdict == to_string(v)) {
      g.verdict = v;
      known = true;
    }
  if (!known) throw std::invalid_argument(std::string(what) + ": gate " + g.gate + ": unknown verdict '" + verdict + "'");
  if (d.contains("finding") && !d["finding"].is_none()) g.finding = nb::cast<std::string>(d["finding"]);
  if (d.contains("error_ratio") && !d["error_ratio"].is_none()) {
    nb::object ratio = d["error_ratio"];
    if (nb::isinstance<nb::str>(ratio)) {
      if (nb::cast<std::string>(ratio) != "inf")
        throw std::invalid_argument(std::string(what) + ": gate " + g.gate + ": error_ratio must be a number, None or 'inf'");
      g.error_ratio = std::numeric_limits<double>::infinity();
    } else {
      g.error_ratio = nb::cast<double>(ratio);
    }
  }
  if (d.contains("counted")) g.counted = nb::cast<bool>(d["counted"]);
  if (d.contains("out_of_domain")) g.out_of_domain = nb::cast<bool>(d["out_of_domain"]);
  if (d.contains("summary") && !d["summary"].is_none()) g.summary = nb::cast<std::string>(d["summary"]);
  if (d.contains("cases") && !d["cases"].is_none()) g.cases = nb::cast<int>(d["cases"]);
  return g;
}

}  // namespace
}  // namespace kgate

NB_MODULE(_core, m) {
  using namespace kgate;
  m.doc() = "kgate's C++ core: dtypes, seeds, host arrays over DLPack, and the Target seam";
  m.attr("__version__") = "0.1.0";

  nb::enum_<DType>(m, "DType")
      .value("f64", DType::f64)
      .value("f32", DType::f32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("i32", DType::i32)
      .value("i64", DType::i64)
      .value("bool", DType::boolean);
  m.def("parse_dtype", [](const std::string& s) {
    auto t = parse_dtype(s);
    if (!t) throw std::invalid_argument("unknown dtype: " + s);
    return *t;
  });
  m.def("dtype_name", [](DType t) { return std::string(name_of(t)); });
  m.def("dtype_size", [](DType t) { return size_of(t); }, "dtype"_a, "bytes of one element");
  m.def("round_to", &round_to, "x"_a, "dtype"_a, "x after a round trip through dtype (nearest, ties to even)");
  m.def("unit_roundoff", [](DType t) { return info(t).unit_roundoff; });

  nb::class_<Stream>(m, "Stream", "A counter-based random stream: element i is a pure function of (key, i)")
      .def(nb::init<std::uint64_t>(), "key"_a)
      .def_prop_ro("key", &Stream::key)
      .def("child", nb::overload_cast<std::uint64_t>(&Stream::child, nb::const_), "index"_a)
      .def("child", nb::overload_cast<std::string_view>(&Stream::child, nb::const_), "label"_a)
      .def("bits", &Stream::bits)
      .def("uniform", &Stream::uniform)
      .def("normal", &Stream::normal)
      .def("integer", &Stream::integer);
  m.def("mix64", [](std::uint64_t z) { return mix64(z); });

  nb::class_<HostArray>(m, "HostArray", "A dense host array owned by C++; numpy.from_dlpack(a) aliases it")
      .def(nb::init<DType, Shape>(), "dtype"_a, "shape"_a)
      .def_prop_ro("dtype", &HostArray::dtype)
      .def_prop_ro("shape", &HostArray::shape)
      .def_prop_ro("nbytes", &HostArray::nbytes)
      .def("get", &HostArray::get)
      .def("set", &HostArray::set)
      .def("numpy", [](nb::handle self) { return nb::ndarray<nb::numpy>(host_view(self, *nb::inst_ptr<HostArray>(self))); },
           "a numpy array aliasing the bytes (no copy); numpy.from_dlpack(a) and torch.from_dlpack(a) work too")
      .def("__dlpack__",
           [](nb::handle self, nb::kwargs kw) -> nb::object {
             (void)kw;  // stream / max_version: host memory needs neither
             return nb::cast(host_view(self, *nb::inst_ptr<HostArray>(self)));  // a DLPack capsule
           })
      .def("__dlpack_device__", [](nb::handle) { return nb::make_tuple(1, 0); })
      .def("data_address", [](HostArray& a) { return reinterpret_cast<std::uintptr_t>(a.data()); })
      .def_static("from_array", &host_from_array, "array"_a, "copies a CPU DLPack array into a HostArray");

  m.def("first_bitwise_difference", &first_bitwise_difference, "a"_a, "b"_a,
        "first flat index where a and b differ bitwise, or -1; reads both in place");
  m.def("nonfinite_classes", &nonfinite_classes, "a"_a,
        "per element 0 finite, 1 NaN, 2 +Inf, 3 -Inf; reads a in place");
  m.def("array_address", [](const CpuArray& a) { return reinterpret_cast<std::uintptr_t>(a.data()); },
        "the address of element 0 as C++ sees it (tests: proves an array crossed without a copy)");

  nb::class_<Layout>(m, "Layout")
      .def(nb::init<>())
      .def_rw("dtype", &Layout::dtype)
      .def_rw("shape", &Layout::shape)
      .def_rw("strides", &Layout::strides)
      .def_rw("offset", &Layout::offset)
      .def("contiguous", &Layout::contiguous)
      .def("storage_elements", &Layout::storage_elements)
      .def_static("dense", &Layout::dense);
  nb::class_<TensorArg>(m, "TensorArg").def(nb::init<>()).def_rw("buffer", &TensorArg::buffer).def_rw("layout", &TensorArg::layout);
  nb::class_<Invocation>(m, "Invocation")
      .def(nb::init<>())
      .def_rw("inputs", &Invocation::inputs)
      .def_rw("outputs", &Invocation::outputs)
      .def_rw("attrs", &Invocation::attrs);
  nb::enum_<StreamMode>(m, "StreamMode")
      .value("own_stream", StreamMode::own_stream)
      .value("null_stream", StreamMode::null_stream)
      .value("staged_inputs", StreamMode::staged_inputs);
  nb::class_<CallRequest>(m, "CallRequest")
      .def(nb::init<>())
      .def_rw("invocations", &CallRequest::invocations)
      .def_rw("stream", &CallRequest::stream)
      .def_prop_rw("poison",
                   [](const CallRequest& r) { return nb::bytes(r.poison.data(), r.poison.size()); },
                   [](CallRequest& r, nb::bytes b) { r.poison = to_bytes(b); });
  nb::enum_<CallOutcome>(m, "CallOutcome")
      .value("completed", CallOutcome::completed)
      .value("crashed", CallOutcome::crashed)
      .value("timed_out", CallOutcome::timed_out);
  nb::class_<GuardViolation>(m, "GuardViolation")
      .def(nb::init<>())
      .def(
          "__init__",
          [](GuardViolation* g, BufferId b, std::int64_t off, std::uint8_t e, std::uint8_t f, std::string region) {
            new (g) GuardViolation{b, off, e, f, std::move(region)};
          },
          "buffer"_a, "offset"_a, "expected"_a, "found"_a, "region"_a = "")
      .def_rw("buffer", &GuardViolation::buffer)
      .def_rw("offset", &GuardViolation::offset)
      .def_rw("expected", &GuardViolation::expected)
      .def_rw("found", &GuardViolation::found)
      .def_rw("region", &GuardViolation::region);
  m.attr("CANDIDATE_OWNED_BUFFER") = kCandidateOwnedBuffer;
  nb::class_<InvocationResult>(m, "InvocationResult")
      .def(nb::init<>())
      .def_rw("status", &InvocationResult::status)
      .def_rw("message", &InvocationResult::message)
      .def_rw("outputs", &InvocationResult::outputs)
      .def(
          "add_output",
          [](InvocationResult& r, DType t, const Shape& shape, nb::bytes data) {
            HostArray a(t, shape);
            if (data.size() != 0) {
              if (data.size() != a.nbytes())
                throw std::invalid_argument("add_output: " + std::to_string(data.size()) + " bytes for " +
                                            std::to_string(a.nbytes()) + " bytes of " + std::string(name_of(t)));
              std::memcpy(a.data(), data.c_str(), a.nbytes());
            }
            r.outputs.push_back(std::move(a));
          },
          "dtype"_a, "shape"_a, "data"_a,
          "appends an output holding `data` (dense bytes of dtype; empty: zeros) with one copy")
      .def(
          "take_output",
          [](InvocationResult& r, HostArray& a) { r.outputs.push_back(std::move(a)); },
          "array"_a,
          "appends `array` as an output without copying: its bytes move into the result and the HostArray is "
          "left empty (a target fills a fresh HostArray in place, e.g. straight from its transport)");
  nb::class_<CallResult>(m, "CallResult")
      .def(nb::init<>())
      .def_rw("outcome", &CallResult::outcome)
      .def_rw("detail", &CallResult::detail)
      .def_rw("results", &CallResult::results)
      .def_rw("guards", &CallResult::guards)
      .def_rw("output", &CallResult::output)
      .def_rw("output_bytes", &CallResult::output_bytes)
      .def_rw("seconds", &CallResult::seconds);
  m.attr("KGATE_OK") = static_cast<int>(KGATE_OK);
  m.attr("KGATE_REFUSED") = static_cast<int>(KGATE_REFUSED);
  m.attr("KGATE_ERROR") = static_cast<int>(KGATE_ERROR);

  nb::class_<Target, PyTarget>(m, "Target",
                               "The engine's seam. Subclass it in Python and implement every method; the "
                               "C++ gates then drive the subclass as any other target.")
      .def(nb::init<>())
      .def("describe", &Target::describe)
      .def("device", [](const Target& t) { return static_cast<int>(t.device()); })
      .def("alloc", &Target::alloc)
      .def("release", &Target::release)
      .def("write", [](Target& t, BufferId id, std::size_t off, nb::handle b) {  // any bytes-like
        const auto v = to_bytes(b);
        t.write(id, off, v);
      })
      .def("read", [](Target& t, BufferId id, std::size_t off, std::size_t n) { return from_bytes(t.read(id, off, n)); })
      .def("check_guards", &Target::check_guards)
      .def("call", &Target::call)
      .def("reset", &Target::reset)
      .def("healthy", &Target::healthy);

  // An in-process CPU target over a Python callable taking (inputs, outputs) as numpy-compatible
  // zero-copy views of the guarded buffers: for tests of the C++ CPU backend from Python.
  m.def(
      "inprocess_target",
      [](std::string name, nb::callable fn) -> std::unique_ptr<Target> {
        auto entry = [fn](const kgate_call& call) -> std::int32_t {
          nb::gil_scoped_acquire gil;
          auto view = [](const DLTensor& t, bool writable) {
            std::vector<size_t> shape(t.shape, t.shape + t.ndim);
            std::vector<int64_t> strides(t.strides, t.strides + t.ndim);
            nb::dlpack::dtype d{static_cast<uint8_t>(t.dtype.code), t.dtype.bits, t.dtype.lanes};
            (void)writable;
            return nb::ndarray<nb::numpy>(t.data, shape.size(), shape.data(), nb::handle(), strides.data(), d);
          };
          nb::list ins, outs;
          // rv_policy::reference: the views alias the guarded buffers (no copy), valid for this call only.
          for (int i = 0; i < call.n_inputs; ++i) ins.append(nb::cast(view(call.inputs[i], false), nb::rv_policy::reference));
          for (int i = 0; i < call.n_outputs; ++i) outs.append(nb::cast(view(call.outputs[i], true), nb::rv_policy::reference));
          return nb::cast<std::int32_t>(fn(ins, outs));
        };
        return make_inprocess_target(std::move(name), entry);
      },
      "name"_a, "fn"_a);

  nb::class_<InputSource, PyInputSource>(
      m, "InputSource",
      "Where ordinary input sets come from. Subclass it in Python with describe() -> str and draw(bindings: "
      "dict[str, int], seed: int) -> list of arrays (contract order, each in its contract dtype and shape, every "
      "value a pure function of (bindings, seed)); call super().__init__(). Raising from draw is the source's "
      "failure (the gate ends ERROR), never the candidate's.")
      .def(nb::init<>())
      .def("describe", &InputSource::describe)
      .def("draw", [](InputSource& s, const Bindings& b, std::uint64_t seed) { return s.draw(b, seed); }, "bindings"_a,
           "seed"_a);
  m.def(
      "contract_draw",
      [](const std::string& contract_toml, const std::string& contract_path, const Bindings& b, std::uint64_t seed) {
        const Contract c = parse_contract(contract_toml, contract_path);
        return make_contract_source(c)->draw(b, seed);
      },
      "contract_toml"_a, "contract_path"_a, "bindings"_a, "seed"_a,
      "the default source's draw: every input from its contract domain (what source=None uses)");

  // The engine's verify() on any Target (a Python one included) with a Python float64 oracle
  // `oracle(inputs: list[HostArray], bindings: dict, attrs: list) -> list[array]`. Returns the report as the
  // engine's JSON document (docs/report.md).
  m.def(
      "verify",
      [](const std::string& contract_toml, const std::string& contract_path, Target& target, nb::callable oracle,
         std::optional<std::uint64_t> seed, std::vector<std::string> gates, double tolerance_scale,
         InputSource* source, nb::object reference_runs, nb::object on_result, nb::object label_runs,
         std::optional<std::int64_t> case_memory, std::string case_memory_why) {
        // case_memory: the bytes one case may take, where the caller knows better than this process's default
        // (the audit: its share of the machine for a row beside others, the machine's when the row runs alone).
        Contract c = case_memory ? parse_contract(contract_toml, contract_path, {*case_memory, case_memory_why})
                                 : parse_contract(contract_toml, contract_path);
        OracleFn fn = [oracle](const std::vector<HostArray>& in, const Bindings& b, const Attrs& a) {
          nb::gil_scoped_acquire gil;
          try {
            const LentArrays lent(in);
            std::vector<HostArray> out = to_host_arrays(oracle(lent.list(), bindings_dict(b), a), "oracle");
            lent.check_unkept("the oracle");
            return out;
          } catch (const nb::python_error& e) {
            throw OracleError(e.what());
          }
        };
        auto runs_of = [](nb::object callable, const char* what) -> ReferenceFn {
          if (callable.is_none()) return {};
          nb::callable rr = nb::borrow<nb::callable>(callable);
          return [rr, what](const std::vector<HostArray>& in, const Bindings& b, const Attrs& a) {
            nb::gil_scoped_acquire gil;
            try {
              std::vector<ReferenceRun> out;
              const LentArrays lent(in);
              nb::object runs = rr(lent.list(), bindings_dict(b), a);
              lent.check_unkept(what);
              // A fresh list of fresh (precision, outputs) tuples, as the front-ends return: the outputs' bytes
              // are moved, not copied (to_host_arrays); anything Python may still reach is copied.
              const bool runs_owned = PyList_CheckExact(runs.ptr()) && Py_REFCNT(runs.ptr()) == 1;
              auto one = [&](nb::handle t, bool tuple_owned) {
                if (nb::len(t) != 2) throw OracleError(std::string(what) + ": each item must be (precision, outputs)");
                std::string precision = nb::cast<std::string>(t[0]);
                if (tuple_owned) {  // borrowed straight out of the tuple: no reference of ours on the list
                  nb::handle arrays(PyTuple_GET_ITEM(t.ptr(), 1));
                  out.push_back({std::move(precision), to_host_arrays(arrays, what, Py_REFCNT(arrays.ptr()) == 1)});
                } else {
                  out.push_back({std::move(precision), to_host_arrays(t[1], what, false)});
                }
              };
              if (runs_owned) {
                for (Py_ssize_t k = 0; k < PyList_GET_SIZE(runs.ptr()); ++k) {
                  nb::handle t(PyList_GET_ITEM(runs.ptr(), k));
                  one(t, PyTuple_CheckExact(t.ptr()) && Py_REFCNT(t.ptr()) == 1);
                }
              } else {
                for (nb::handle t : runs) one(t, false);
              }
              return out;
            } catch (const nb::python_error& e) {
              throw OracleError(e.what());
            } catch (const nb::cast_error& e) {
              throw OracleError(std::string(what) + " returned something unexpected: " + e.what());
            }
          };
        };
        ReferenceFn refs = runs_of(reference_runs, "reference_runs");
        ReferenceFn labels = runs_of(label_runs, "label_runs");
        auto o = make_function_oracle("python oracle", fn, refs, labels);
        VerifyOptions opt;
        opt.seed = seed;
        opt.gates = std::move(gates);
        opt.tolerance_scale = tolerance_scale;
        opt.source = source;
        std::string callback_error;
        if (!on_result.is_none()) {
          nb::callable cb = nb::borrow<nb::callable>(on_result);
          opt.on_result = [cb, &callback_error](const GateResult& g) {
            const std::string text = to_json(g);
            nb::gil_scoped_acquire gil;
            if (!callback_error.empty()) return;
            try {
              cb(text);
            } catch (const nb::python_error& e) {
              callback_error = e.what();  // raised again once verify() returns, as a RuntimeError
            }
          };
        }
        Report rep;
        {
          nb::gil_scoped_release release;  // the gates take the GIL back only to call into Python
          rep = verify(c, target, *o, opt);
        }
        if (!callback_error.empty()) throw std::runtime_error("on_result raised: " + callback_error);
        return to_json(rep);
      },
      "contract_toml"_a, "contract_path"_a, "target"_a, "oracle"_a, "seed"_a = nb::none(),
      "gates"_a = std::vector<std::string>{}, "tolerance_scale"_a = 1.0, "source"_a.none() = nb::none(),
      "reference_runs"_a = nb::none(), "on_result"_a = nb::none(), "label_runs"_a = nb::none(),
      "case_memory"_a = nb::none(), "case_memory_why"_a = "given by the caller");
  // The engine's case memory estimate (case_bytes) of a contract, read without the memory check: what its
  // nominal and largest cases need, against what this process allows one case (case_memory_limit).
  m.def(
      "case_memory",
      [](const std::string& contract_toml, const std::string& contract_path) {
        const Contract c = parse_contract(contract_toml, contract_path, CaseMemoryLimit{0, "not checked"});
        nb::dict out;
        out["nominal"] = case_bytes(c, c.nominal());
        out["largest"] = largest_case_bytes(c);
        return out;
      },
      "contract_toml"_a, "contract_path"_a,
      "{'nominal': bytes, 'largest': bytes}: the engine's estimate of one case at the nominal shape and at every "
      "dim's max (each tensor capped at max_case_elements)");
  m.def(
      "check_contract",
      [](const std::string& contract_toml, const std::string& contract_path, std::optional<std::int64_t> case_memory,
         std::string case_memory_why) {
        if (case_memory)
          (void)parse_contract(contract_toml, contract_path, CaseMemoryLimit{*case_memory, case_memory_why});
        else
          (void)parse_contract(contract_toml, contract_path);
      },
      "contract_toml"_a, "contract_path"_a, "case_memory"_a = nb::none(), "case_memory_why"_a = "given by the caller",
      "reads and checks a contract as verify() does, its case memory against case_memory (bytes; default: "
      "case_memory_limit()), allocating nothing; RuntimeError with the engine's one-line message");
  m.def(
      "case_memory_limit",
      []() {
        const CaseMemoryLimit l = case_memory_limit();
        return nb::make_tuple(l.bytes, l.why);
      },
      "(bytes, why): what one case may take in this process by default (KGATE_CASE_MEMORY, else 3/4 of the "
      "machine's memory); ValueError on a bad KGATE_CASE_MEMORY");
  // The engine's classification (kgate::classify, broken_reasons, Report::exit_code) of gate records as the
  // report's JSON gives them (to_json(GateResult)): of each, gate, verdict, finding, error_ratio (a number,
  // None or "inf"), counted and out_of_domain are read, the rest ignored. For a row whose gate results come
  // from more than one verify() run (kernelbench/rowjob.py: the guard allocator's second pass), so that its
  // class is still the engine's and never re-derived in Python.
  m.def(
      "classify",
      [](nb::list gates) {
        Report r;
        for (nb::handle h : gates) {
          GateResult g = gate_from_record(h, "classify");
          r.gates.push_back(std::move(g));
        }
        nb::dict out;
        out["classification"] = std::string(to_string(classify(r)));
        out["broken_reasons"] = broken_reasons(r);
        out["exit_code"] = r.exit_code();
        return out;
      },
      "gates"_a,
      "{'classification', 'broken_reasons', 'exit_code'}: the engine's classification of a list of gate records "
      "(dicts as a report's 'gates' holds them), as verify()'s report would give it for those results");
  // The bounds gate's compute-sanitizer pass (kgate/sanitizer_log.hpp), for the Python front-end's pass
  // (kgate/kernelbench/sanitizer.py): the same tools, lookup, command, log parser and verdict as the C++ CLI's.
  m.def("sanitizer_tools", []() { return kSanitizerTools; }, "the compute-sanitizer tools the pass can run");
  m.def(
      "find_compute_sanitizer",
      []() {
        std::string looked;
        const std::optional<std::string> exe = find_compute_sanitizer(&looked);
        return nb::make_tuple(exe ? nb::cast(*exe) : nb::none(), looked);
      },
      "(path or None, where it looked): $KGATE_COMPUTE_SANITIZER, PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, "
      "the folder of nvcc");
  m.def("sanitizer_launch_prefix", &sanitizer_launch_prefix, "exe"_a, "tool"_a, "log_file"_a, "launch_timeout"_a,
        "the words a worker starts under for the pass (the tool, its log file, the worker alone, and "
        "--launch-timeout: `launch_timeout`, the pass's per-request seconds, rounded up)");
  m.def(
      "parse_sanitizer_log",
      [](const std::string& tool, const std::string& log) {
        nb::list out;
        for (const SanitizerFinding& f : parse_sanitizer_log(tool, log)) {
          nb::dict d;
          d["tool"] = f.tool;
          d["kind"] = f.kind;
          d["kernel"] = f.kernel;
          d["address"] = f.address;
          d["size"] = f.size;
          d["where"] = f.where;
          d["api_error"] = f.api_error;
          d["tool_error"] = f.tool_error;
          d["text"] = f.text;
          out.append(d);
        }
        return out;
      },
      "tool"_a, "log"_a, "the records of a compute-sanitizer log, as dicts of SanitizerFinding's fields");
  m.def(
      "sanitizer_result",
      [](const std::string& tool, const std::vector<std::pair<std::string, std::string>>& logs, nb::handle bounds,
         std::uint64_t seed) {
        return to_json(sanitizer_result(tool, logs, gate_from_record(bounds, "sanitizer_result"), seed));
      },
      "tool"_a, "logs"_a, "bounds"_a, "seed"_a,
      "the bounds/<tool> gate record (JSON) from the tool's logs [(name, text)] and the bounds gate's record "
      "in the run under the tool: FAIL on the first access reported, else the bounds gate's verdict");
  m.def(
      "sanitizer_missing",
      [](const std::string& tool, const std::string& looked) { return to_json(sanitizer_missing(tool, looked)); },
      "tool"_a, "looked"_a, "the bounds/<tool> gate record (JSON) when compute-sanitizer is not installed: SKIP");
  m.def("list_gates", []() {
    std::vector<std::string> out;
    for (const GateInfo& g : list_gates()) out.push_back(g.name);
    return out;
  });

  nb::class_<DriveResult>(m, "DriveResult")
      .def_ro("call", &DriveResult::call)
      .def_ro("guards_after", &DriveResult::guards_after);
  m.def(
      "drive_target",
      [](Target& t, const std::vector<HostArray>& inputs, const std::vector<std::pair<DType, Shape>>& outputs,
         nb::bytes poison, StreamMode stream) { return drive_target(t, inputs, outputs, to_bytes(poison), stream); },
      "target"_a, "inputs"_a, "outputs"_a, "poison"_a = nb::bytes(""), "stream"_a = StreamMode::own_stream,
        "runs one gate-style call against target from C++ (alloc, write, call, guards, release)");
}
