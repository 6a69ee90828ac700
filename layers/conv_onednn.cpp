#include "layers/conv_onednn.h"

#include <dnnl.hpp>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "layers/conv_single_output.h"

namespace mrmf::onednn_conv {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

namespace {

// One engine and stream for the process: oneDNN CPU primitives are
// thread-safe to execute and the stream is an in-order host stream.
dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
dnnl::stream& cpu_dnnl_stream() {
  static dnnl::stream s(cpu_engine());
  return s;
}

tag act_tag(int dims) { return dims == 1 ? tag::ncw : dims == 2 ? tag::nchw : tag::ncdhw; }
tag wei_tag(int dims) { return dims == 1 ? tag::oiw : dims == 2 ? tag::oihw : tag::oidhw; }

memory::dims to_dims(const Shape& s) {
  const std::vector<int64_t> v = s.vec();
  return memory::dims(v.begin(), v.end());
}

// oneDNN reports failures as dnnl::error; turn them into mrmf errors that
// name the operation and the problem.
template <class F>
void guarded(const char* what, const ConvSpec& spec, const Shape& x, F&& f) {
  try {
    f();
  } catch (const dnnl::error& e) {
    MRMF_THROW(Runtime, "oneDNN convolution ", what, " for input ", x.str(), " and weights ", spec.weight_shape().str(),
               " failed: ", e.what(), " (status ", static_cast<int>(e.status), ")");
  }
}

// A user tensor in the plain layout and the layout a primitive wants. When
// they differ, a persistent staging buffer and the reorder between the two
// are created once; otherwise the user pointer is used directly.
struct Staged {
  memory::desc plain, want;
  std::optional<memory> buf;
  std::optional<dnnl::reorder> to_want, to_plain;

  Staged() = default;
  Staged(const memory::desc& p, const memory::desc& w, bool input) : plain(p), want(w) {
    if (plain == want) return;
    auto& eng = cpu_engine();
    buf.emplace(want, eng);
    if (input)
      to_want.emplace(dnnl::reorder::primitive_desc(eng, plain, eng, want));
    else
      to_plain.emplace(dnnl::reorder::primitive_desc(eng, want, eng, plain));
  }
  bool direct() const { return !buf; }
  // Memory holding the input at `p`, in the wanted layout.
  memory input(const void* p) const {
    memory user(plain, cpu_engine(), const_cast<void*>(p));
    if (direct()) return user;
    to_want->execute(cpu_dnnl_stream(), {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, *buf}});
    return *buf;
  }
  // Memory a primitive writes its output into; finish(p) moves it to `p`.
  memory output(void* p) const { return direct() ? memory(plain, cpu_engine(), p) : *buf; }
  void finish(void* p) const {
    if (direct()) return;
    memory user(plain, cpu_engine(), p);
    to_plain->execute(cpu_dnnl_stream(), {{DNNL_ARG_FROM, *buf}, {DNNL_ARG_TO, user}});
  }
};

struct Backward {
  dnnl::convolution_backward_data::primitive_desc data_pd;
  dnnl::convolution_backward_data data;
  dnnl::convolution_backward_weights::primitive_desc wei_pd;
  dnnl::convolution_backward_weights wei;
  Staged d_ddst, d_w, d_dsrc;    // backward data
  Staged w_src, w_ddst, w_dwei;  // backward weights
};

// Everything for one input shape.
struct Entry {
  memory::desc src_plain, wei_plain, dst_plain, bias_md;
  memory::dims strides, pad_l, pad_r;
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Staged f_src, f_wei, f_dst;
  // The user pointer whose reordered copy f_src.buf holds (nullptr: none).
  // Backward-weights reuses that copy instead of reordering x again: x is
  // kept alive by the layer between forward and backward, so a forward of
  // the same address since then was a forward of the same data.
  const void* f_src_of = nullptr;
  std::optional<Backward> bwd;  // built on the first backward call (eval-only layers never need it)
  std::string info;             // oneDNN's implementation names (fwd, then bwd-data and bwd-weights once built)
};

constexpr const char* kSingleOutputInfo = "one output position: dnnl_sgemm over the valid taps";

}  // namespace

struct Primitives::Impl {
  std::map<std::vector<int64_t>, std::unique_ptr<Entry>> cache;
  SingleOutputConv single;  // shapes with one output position (see its header)
  size_t builds = 0;
  std::string last_info;  // the implementation of the last forward or backward run

  static std::vector<int64_t> key(const ConvSpec& s, const Shape& x) {
    std::vector<int64_t> k = x.vec();
    for (auto* v : {&s.kernel, &s.stride, &s.pad}) k.insert(k.end(), v->begin(), v->end());
    k.push_back(s.bias);
    return k;
  }

  Entry& entry(const ConvSpec& spec, const Shape& x) {
    auto k = key(spec, x);
    auto it = cache.find(k);
    if (it != cache.end()) return *it->second;
    // A layer sees very few shapes (train batch, eval batch, a last partial
    // batch); bound the cache so a pathological caller cannot grow it forever.
    if (cache.size() >= 8) cache.clear();
    auto e = build(spec, x);
    ++builds;
    return *cache.emplace(std::move(k), std::move(e)).first->second;
  }

  std::unique_ptr<Entry> build(const ConvSpec& spec, const Shape& x) {
    auto e = std::make_unique<Entry>();
    const Shape y = spec.output_shape_unchecked(x);
    const int d = spec.dims;
    e->src_plain = memory::desc(to_dims(x), dt::f32, act_tag(d));
    e->dst_plain = memory::desc(to_dims(y), dt::f32, act_tag(d));
    e->wei_plain = memory::desc(to_dims(spec.weight_shape()), dt::f32, wei_tag(d));
    e->bias_md = memory::desc({spec.out_channels}, dt::f32, tag::x);
    for (int i = 0; i < d; ++i) {
      e->strides.push_back(spec.stride[i]);
      e->pad_l.push_back(spec.pad[i]);
      // PyTorch floors the output size; oneDNN wants the padding that makes the
      // division exact, so the right padding may be smaller (even negative).
      e->pad_r.push_back((y[2 + i] - 1) * spec.stride[i] + spec.kernel[i] - x[2 + i] - spec.pad[i]);
    }
    // format_tag::any lets oneDNN pick its blocked layouts (nCw16c, OIdhw16i16o, ...)
    // for which its JIT kernels are several times faster than on plain layouts.
    const memory::desc src_any(to_dims(x), dt::f32, tag::any), dst_any(to_dims(y), dt::f32, tag::any),
        wei_any(to_dims(spec.weight_shape()), dt::f32, tag::any);
    auto fd =
        spec.bias
            ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              src_any, wei_any, e->bias_md, dst_any, e->strides, e->pad_l, e->pad_r)
            : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                              src_any, wei_any, dst_any, e->strides, e->pad_l, e->pad_r);
    e->fwd_pd = dnnl::convolution_forward::primitive_desc(fd, cpu_engine());
    e->fwd = dnnl::convolution_forward(e->fwd_pd);
    e->f_src = Staged(e->src_plain, e->fwd_pd.src_desc(), true);
    e->f_wei = Staged(e->wei_plain, e->fwd_pd.weights_desc(), true);
    e->f_dst = Staged(e->dst_plain, e->fwd_pd.dst_desc(), false);
    e->info = std::string("fwd ") + e->fwd_pd.impl_info_str();
    return e;
  }

  void build_backward(const ConvSpec& spec, Entry& e) {
    const memory::desc src_any(e.src_plain.dims(), dt::f32, tag::any), dst_any(e.dst_plain.dims(), dt::f32, tag::any),
        wei_any(e.wei_plain.dims(), dt::f32, tag::any);
    auto& eng = cpu_engine();
    Backward b;
    dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any, e.strides,
                                             e.pad_l, e.pad_r);
    b.data_pd = dnnl::convolution_backward_data::primitive_desc(dd, eng, e.fwd_pd);
    b.data = dnnl::convolution_backward_data(b.data_pd);
    auto wd = spec.bias
                  ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any,
                                                             e.bias_md, dst_any, e.strides, e.pad_l, e.pad_r)
                  : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any,
                                                             dst_any, e.strides, e.pad_l, e.pad_r);
    b.wei_pd = dnnl::convolution_backward_weights::primitive_desc(wd, eng, e.fwd_pd);
    // With few input channels oneDNN's 'any' picks a plain src and falls back
    // to im2col + GEMM for the weight gradient, which is one to two orders of
    // magnitude slower (CosmoFlow's 4-channel input: 0.5 s to several s per
    // step). Try layouts for which a JIT kernel exists and keep the first that
    // gets one: a channel-blocked src (zero-padded to 16), then channels-last
    // src and diff_dst (oneDNN 2.6 has a JIT kernel for ic = 4 only there).
    // The reorders into these layouts cost milliseconds.
    if (std::string(b.wei_pd.impl_info_str()).find("gemm") != std::string::npos) {
      const tag blocked = spec.dims == 1 ? tag::nCw16c : spec.dims == 2 ? tag::nChw16c : tag::nCdhw16c;
      const tag last = spec.dims == 1 ? tag::nwc : spec.dims == 2 ? tag::nhwc : tag::ndhwc;
      const std::pair<tag, tag> tries[] = {{blocked, tag::any}, {last, last}};
      for (const auto& [src_tag, dst_tag] : tries) {
        const memory::desc src_t(e.src_plain.dims(), dt::f32, src_tag), dst_t(e.dst_plain.dims(), dt::f32, dst_tag);
        try {
          auto wd2 = spec.bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_t,
                                                                          wei_any, e.bias_md, dst_t, e.strides,
                                                                          e.pad_l, e.pad_r)
                               : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_t,
                                                                          wei_any, dst_t, e.strides, e.pad_l, e.pad_r);
          dnnl::convolution_backward_weights::primitive_desc pd2(wd2, eng, e.fwd_pd);
          const std::string name = pd2.impl_info_str();  // only a JIT kernel is an improvement (not ref:any)
          if (name.find("jit") != std::string::npos && name.find("gemm") == std::string::npos) {
            b.wei_pd = pd2;
            break;
          }
        } catch (const dnnl::error&) {
          // No implementation for this layout: try the next one.
        }
      }
    }
    b.wei = dnnl::convolution_backward_weights(b.wei_pd);
    b.d_ddst = Staged(e.dst_plain, b.data_pd.diff_dst_desc(), true);
    b.d_w = Staged(e.wei_plain, b.data_pd.weights_desc(), true);
    b.d_dsrc = Staged(e.src_plain, b.data_pd.diff_src_desc(), false);
    b.w_src = Staged(e.src_plain, b.wei_pd.src_desc(), true);
    b.w_ddst = Staged(e.dst_plain, b.wei_pd.diff_dst_desc(), true);
    b.w_dwei = Staged(e.wei_plain, b.wei_pd.diff_weights_desc(), false);
    e.bwd.emplace(std::move(b));
    e.info +=
        std::string(", bwd-data ") + e.bwd->data_pd.impl_info_str() + ", bwd-weights " + e.bwd->wei_pd.impl_info_str();
  }
};

Primitives::Primitives() : impl_(std::make_unique<Impl>()) {}
Primitives::~Primitives() = default;
size_t Primitives::builds() const { return impl_->builds; }
std::string Primitives::impl_info() const { return impl_->last_info; }

void Primitives::forward(const ConvSpec& spec, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& y) {
  guarded("forward", spec, x.shape(), [&] {
    if (SingleOutputConv::applies(spec, x.shape())) {
      impl_->single.forward(spec, x, w, b, y);
      impl_->last_info = kSingleOutputInfo;
      return;
    }
    Entry& e = impl_->entry(spec, x.shape());
    impl_->last_info = e.info;
    auto& s = cpu_dnnl_stream();
    e.f_src_of = e.f_src.direct() ? nullptr : x.raw_data();
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, e.f_src.input(x.raw_data())},
                                         {DNNL_ARG_WEIGHTS, e.f_wei.input(w.raw_data())},
                                         {DNNL_ARG_DST, e.f_dst.output(y.raw_data())}};
    if (spec.bias) args.emplace(DNNL_ARG_BIAS, memory(e.bias_md, cpu_engine(), b.raw_data()));
    e.fwd.execute(s, args);
    e.f_dst.finish(y.raw_data());
    s.wait();
  });
}

void Primitives::backward(const ConvSpec& spec, const Tensor& x, const Tensor& dy, const Tensor& w, const Tensor& dx,
                          const Tensor& dw, const Tensor& db) {
  guarded("backward", spec, x.shape(), [&] {
    if (SingleOutputConv::applies(spec, x.shape())) {
      impl_->single.backward(spec, x, dy, w, dx, dw, db);
      impl_->last_info = kSingleOutputInfo;
      return;
    }
    Entry& e = impl_->entry(spec, x.shape());
    if (!e.bwd) impl_->build_backward(spec, e);
    impl_->last_info = e.info;
    Backward& b = *e.bwd;
    auto& s = cpu_dnnl_stream();

    // Weight gradients (+ bias).
    memory ddst_w = b.w_ddst.input(dy.raw_data());
    const bool reuse_src = !b.w_src.direct() && e.f_src_of == x.raw_data() && b.w_src.want == e.f_src.want;
    std::unordered_map<int, memory> wargs{{DNNL_ARG_SRC, reuse_src ? *e.f_src.buf : b.w_src.input(x.raw_data())},
                                          {DNNL_ARG_DIFF_DST, ddst_w},
                                          {DNNL_ARG_DIFF_WEIGHTS, b.w_dwei.output(dw.raw_data())}};
    if (spec.bias) wargs.emplace(DNNL_ARG_DIFF_BIAS, memory(e.bias_md, cpu_engine(), db.raw_data()));
    b.wei.execute(s, wargs);
    b.w_dwei.finish(dw.raw_data());

    // Input gradient; reuse the reordered dy when both primitives want the same layout.
    if (dx.defined()) {
      memory ddst_d = b.d_ddst.want == b.w_ddst.want ? ddst_w : b.d_ddst.input(dy.raw_data());
      b.data.execute(s, {{DNNL_ARG_DIFF_DST, ddst_d},
                         {DNNL_ARG_WEIGHTS, b.d_w.input(w.raw_data())},
                         {DNNL_ARG_DIFF_SRC, b.d_dsrc.output(dx.raw_data())}});
      b.d_dsrc.finish(dx.raw_data());
    }
    s.wait();
  });
}

}  // namespace mrmf::onednn_conv
