// Oracles: a float64 function behind a Target (usually a library in its own worker), or in this process.
#include "kgate/oracle.hpp"

#include "kgate/compare.hpp"
#include "kgate/parallel.hpp"

#include <fmt/format.h>

namespace kgate {
namespace {

HostArray widen(const HostArray& in) {
  HostArray out(DType::f64, in.shape());
  // HostArray storage comes from operator new, aligned for double.
  double* wide = reinterpret_cast<double*>(out.data());
  const std::size_t es = size_of(in.dtype());
  parallel_chunks(in.numel(), [&](std::int64_t, std::int64_t begin, std::int64_t end) {  // per element: any split
    decode_elements(in.dtype(), in.data() + static_cast<std::size_t>(begin) * es, end - begin, wide + begin);
  });
  return out;
}

class TargetOracle final : public Oracle {
 public:
  TargetOracle(std::unique_ptr<Target> t, const Contract& c) : target_(std::move(t)), contract_(c) {}

  std::string describe() const override { return target_->describe(); }

  std::vector<HostArray> evaluate(const std::vector<HostArray>& inputs, const Bindings& b, const Attrs& attrs) override {
    if (inputs.size() != contract_.inputs.size())
      throw OracleError(fmt::format("oracle given {} inputs, contract {} has {}", inputs.size(), contract_.name,
                                    contract_.inputs.size()));
    if (!target_->healthy()) target_->reset();
    Buffers held(*target_);
    Invocation inv;
    inv.attrs = attrs;
    for (const HostArray& in : inputs) {
      // The oracle computes in float64 on exactly the values the kernel saw; integers stay integers.
      const HostArray wide = is_float(in.dtype()) ? widen(in) : in;
      const BufferId id = held.alloc(wide.nbytes());
      target_->write(id, 0, wide.bytes());
      inv.inputs.push_back({id, Layout::dense(wide.dtype(), wide.shape())});
    }
    for (const TensorSpec& o : contract_.outputs) {
      const DType t = is_float(o.dtype) ? DType::f64 : o.dtype;
      const Shape s = o.resolve(b);
      const BufferId id = held.alloc(static_cast<std::size_t>(numel(s)) * size_of(t));
      inv.outputs.push_back({id, Layout::dense(t, s)});
    }
    CallRequest req;
    req.invocations.push_back(std::move(inv));
    const CallResult r = target_->call(req);
    const std::string who = fmt::format("oracle {} at {}", target_->describe(), to_string(b));
    switch (r.outcome) {
      case CallOutcome::crashed:
        held.forget();
        target_->reset();
        throw OracleError(fmt::format("{} crashed: {}", who, r.detail));
      case CallOutcome::timed_out:
        held.forget();
        target_->reset();
        throw OracleError(fmt::format("{} timed out: {}", who, r.detail));
      case CallOutcome::completed: break;
    }
    if (r.results.size() != 1) throw OracleError(fmt::format("{}: no result came back", who));
    const InvocationResult& res = r.results[0];
    if (res.status == KGATE_REFUSED) throw OracleError(fmt::format("{} refused the input: {}", who, res.message));
    if (res.status != KGATE_OK) throw OracleError(fmt::format("{} failed (status {}): {}", who, res.status, res.message));
    if (!r.guards.empty())
      throw OracleError(fmt::format("{} wrote outside its buffers (buffer {}, byte {})", who, r.guards[0].buffer,
                                    r.guards[0].offset));
    if (res.outputs.size() != contract_.outputs.size())
      throw OracleError(fmt::format("{} returned {} outputs, expected {}", who, res.outputs.size(), contract_.outputs.size()));
    return res.outputs;
  }

 private:
  // Releases the oracle's buffers however the call ends; after a crash they died with the worker.
  class Buffers {
   public:
    explicit Buffers(Target& t) : t_(t) {}
    ~Buffers() {
      for (BufferId id : ids_) {
        try {
          t_.release(id);
        } catch (const std::exception&) {  // the target is gone or was reset: nothing left to free
        }
      }
    }
    BufferId alloc(std::size_t bytes) {
      ids_.push_back(t_.alloc(bytes));
      return ids_.back();
    }
    void forget() { ids_.clear(); }

   private:
    Target& t_;
    std::vector<BufferId> ids_;
  };

  std::unique_ptr<Target> target_;
  Contract contract_;
};

class FunctionOracle final : public Oracle {
 public:
  FunctionOracle(std::string name, OracleFn fn, ReferenceFn refs, ReferenceFn labels)
      : name_(std::move(name)), fn_(std::move(fn)), refs_(std::move(refs)), labels_(std::move(labels)) {}
  std::string describe() const override { return name_ + " (in-process)"; }
  std::vector<HostArray> evaluate(const std::vector<HostArray>& inputs, const Bindings& b, const Attrs& attrs) override {
    return guarded("oracle", b, [&] { return fn_(inputs, b, attrs); });
  }
  std::vector<ReferenceRun> reference_runs(const std::vector<HostArray>& inputs, const Bindings& b,
                                           const Attrs& attrs) override {
    if (!refs_) return {};
    return guarded("reference runs of", b, [&] { return refs_(inputs, b, attrs); });
  }
  bool has_reference_runs() const override { return static_cast<bool>(refs_); }
  std::vector<ReferenceRun> label_runs(const std::vector<HostArray>& inputs, const Bindings& b,
                                       const Attrs& attrs) override {
    if (!refs_ || !labels_) return {};
    return guarded("label runs of", b, [&] { return labels_(inputs, b, attrs); });
  }

 private:
  // Runs f; anything it throws but an OracleError becomes one naming this oracle and the bindings.
  template <class F>
  auto guarded(const char* what, const Bindings& b, F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const OracleError&) {
      throw;
    } catch (const std::exception& e) {
      throw OracleError(fmt::format("{} {} threw at {}: {}", what, name_, to_string(b), e.what()));
    }
  }

 private:
  std::string name_;
  OracleFn fn_;
  ReferenceFn refs_;
  ReferenceFn labels_;
};

}  // namespace

std::unique_ptr<Oracle> make_target_oracle(std::unique_ptr<Target> target, const Contract& contract) {
  if (!target) throw std::invalid_argument("make_target_oracle: no target");
  return std::make_unique<TargetOracle>(std::move(target), contract);
}

std::unique_ptr<Oracle> make_function_oracle(std::string name, OracleFn fn, ReferenceFn refs, ReferenceFn labels) {
  if (!fn) throw std::invalid_argument("make_function_oracle: empty function");
  return std::make_unique<FunctionOracle>(std::move(name), std::move(fn), std::move(refs), std::move(labels));
}

}  // namespace kgate
