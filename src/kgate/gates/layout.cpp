// Gate 12, layout: no hidden alignment or stride assumption. Every tensor's base one element into its buffer
// (misaligned for any vector width), and for inputs marked strided, non-contiguous views: padded rows, every
// stride doubled, and column-major order. Gaps hold NaN bytes, so a kernel that ignores strides reads
// garbage. Each case is correct within the oracle gate's bound or cleanly REFUSED, never silently wrong; a
// write into an output's gap is a tolerance-free FAIL.
#include <limits>

#include <fmt/format.h>

#include "gates/common.hpp"
#include "gates/gates.hpp"

namespace kgate::gates {
namespace {

enum class View { offset_one, padded_rows, doubled_strides, column_major };

const char* describe(View v) {
  switch (v) {
    case View::offset_one: return "every tensor one element into its buffer";
    case View::padded_rows: return "strided inputs with padded rows";
    case View::doubled_strides: return "strided inputs with every stride doubled";
    case View::column_major: return "strided inputs in column-major order";
  }
  return "?";
}

constexpr std::byte kGap{0xff};        // NaN in every float dtype
constexpr std::byte kOutputGap{0xa5};  // what an output's gap must still hold after the call

Layout strided(const Layout& dense, View v) {
  Layout l = dense;
  const std::size_t rank = l.shape.size();
  if (rank == 0) return l;
  switch (v) {
    case View::offset_one: l.offset = 1; break;
    case View::padded_rows: {
      std::int64_t acc = 1;
      for (std::size_t d = rank; d-- > 0;) {
        l.strides[d] = acc;
        acc *= l.shape[d] + (d == rank - 1 ? 3 : 0);  // three elements of padding after every row
      }
      if (rank == 1) l.strides[0] = 2;
      break;
    }
    case View::doubled_strides:
      for (auto& s : l.strides) s *= 2;
      break;
    case View::column_major: {
      std::int64_t acc = 1;
      for (std::size_t d = 0; d < rank; ++d) {
        l.strides[d] = acc;
        acc *= l.shape[d];
      }
      break;
    }
  }
  return l;
}

class LayoutGate final : public Gate {
 public:
  GateInfo info() const override {
    return {"layout", "no hidden alignment or stride assumption",
            "bases one element off (inputs and outputs); for inputs marked strided also padded rows, doubled "
            "strides and column-major views; correct within bound or REFUSED; writes into output gaps fail",
            false, false};
  }

  std::vector<GateCase> cases(GateContext& ctx) override {
    std::vector<View> views{View::offset_one};
    bool any_strided = false, any_matrix = false;
    for (const TensorSpec& s : ctx.contract().inputs) {
      any_strided = any_strided || s.strided;
      any_matrix = any_matrix || (s.strided && s.shape.size() >= 2);
    }
    if (any_strided) {
      views.push_back(View::padded_rows);
      views.push_back(View::doubled_strides);
      if (any_matrix) views.push_back(View::column_major);
    }
    std::vector<GateCase> out;
    for (View v : views) {
      GateCase g;
      g.label = describe(v);
      g.bindings = ctx.contract().nominal();
      g.seed = ctx.standard_stream(0).key();
      g.run = [v](GateContext& cx, const CaseInfo& info) { return run_case(cx, info, v); };
      out.push_back(std::move(g));
    }
    return out;
  }

 private:
  static CaseOutcome run_case(GateContext& ctx, const CaseInfo& info, View v) {
    const Contract& c = ctx.contract();
    const InputSetPtr in = ctx.standard_inputs(info.bindings, 0);
    std::vector<Placement> pin = ctx.dense_inputs(info.bindings), pout = ctx.dense_outputs(info.bindings);
    for (std::size_t i = 0; i < pin.size(); ++i) {
      pin[i].gap_fill = kGap;
      if (v == View::offset_one || c.inputs[i].strided) pin[i].layout = strided(pin[i].layout, v);
    }
    for (Placement& p : pout) {
      p.gap_fill = kOutputGap;
      if (v == View::offset_one) p.layout.offset = 1;
    }
    std::vector<HostArray> got;
    CallResult r;
    {
      PlacedCall p(ctx.candidate(), in->arrays, pin, pout, ctx.attrs());
      r = call_once(ctx, p);
      if (auto bad = call_problem(ctx, r, 0, info, true)) return *bad;
      for (std::size_t o = 0; o < c.outputs.size(); ++o) {
        const std::size_t gap = static_cast<std::size_t>(pout[o].layout.offset) * size_of(c.outputs[o].dtype);
        const std::vector<std::byte> now = p.output_prefix(o, gap);  // the gap alone: the elements came back with r
        for (std::size_t b = 0; b < gap && b < now.size(); ++b) {
          if (now[b] == kOutputGap) continue;
          Evidence e = info.evidence();
          e.tensor = c.outputs[o].name;
          e.index = {-1};
          e.expected = fmt::format("byte {} before the first element untouched (0x{:02x})", gap - b,
                                   static_cast<unsigned>(kOutputGap));
          e.got = fmt::format("0x{:02x}", static_cast<unsigned>(now[b]));
          e.detail = "the kernel wrote in front of the output's first element: it ignores the base offset "
                     "(e.g. rounds the pointer down to an aligned address)";
          return failed(std::move(e), &r, std::numeric_limits<double>::quiet_NaN(), "wrote before the first element");
        }
      }
      got = std::move(r.results[0].outputs);
    }
    return judge_within(ctx, info, got, *in, *ctx.oracle(*in), ctx.tolerances(info.bindings), &r);
  }
};

}  // namespace

std::unique_ptr<Gate> make_layout_gate() { return std::make_unique<LayoutGate>(); }

}  // namespace kgate::gates
