#include "models/registry.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

#include "layers/conv.h"

namespace mrmf {

namespace {
// Reads typed options and remembers which keys were used, so leftovers
// (typos) are reported instead of silently ignored.
class Options {
 public:
  Options(const ModelSpec& s) : spec_(s) {}
  const std::string* raw(const std::string& k) {
    used_.insert(k);
    auto it = spec_.options.find(k);
    return it == spec_.options.end() ? nullptr : &it->second;
  }
  int64_t get_int(const std::string& k, int64_t def) {
    const std::string* v = raw(k);
    return v ? to_int(k, *v) : def;
  }
  double get_real(const std::string& k, double def) {
    const std::string* v = raw(k);
    if (!v) return def;
    try {
      size_t pos = 0;
      const double d = std::stod(*v, &pos);
      if (pos == v->size()) return d;
    } catch (...) {
    }
    MRMF_THROW(Config, "model option ", k, " = '", *v, "': expected a number");
  }
  bool get_bool(const std::string& k, bool def) {
    const std::string* v = raw(k);
    if (!v) return def;
    if (*v == "true" || *v == "1" || *v == "yes" || *v == "on") return true;
    if (*v == "false" || *v == "0" || *v == "no" || *v == "off") return false;
    MRMF_THROW(Config, "model option ", k, " = '", *v, "': expected true or false");
  }
  std::vector<int64_t> get_list(const std::string& k, std::vector<int64_t> def) {
    const std::string* v = raw(k);
    if (!v) return def;
    std::vector<int64_t> out;
    std::stringstream ss(*v);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(to_int(k, item));
    MRMF_CHECK_KIND(Config, !out.empty(), "model option ", k, " is empty");
    return out;
  }
  std::string get_str(const std::string& k, const std::string& def) {
    const std::string* v = raw(k);
    return v ? *v : def;
  }
  void check_all_used() const {
    std::string extra;
    for (const auto& kv : spec_.options)
      if (!used_.count(kv.first)) extra += (extra.empty() ? "" : ", ") + kv.first;
    std::string known;
    for (const auto& k : used_) known += (known.empty() ? "" : ", ") + k;
    MRMF_CHECK_KIND(Config, extra.empty(), "unknown option(s) for model ", spec_.name, ": ", extra,
                    " (known: ", known, ")");
  }

 private:
  static int64_t to_int(const std::string& k, const std::string& v) {
    try {
      size_t pos = 0;
      const long long i = std::stoll(v, &pos);
      if (pos == v.size()) return i;
    } catch (...) {
    }
    MRMF_THROW(Config, "model option ", k, " = '", v, "': expected an integer");
  }
  const ModelSpec& spec_;
  std::set<std::string> used_;
};
}  // namespace

std::string ModelSpec::str() const {
  std::ostringstream os;
  os << name << "/" << (variant.empty() ? "default" : variant) << " (" << shape_to_list(sample_shape) << ")";
  for (const auto& kv : options) os << " " << kv.first << "=" << kv.second;
  return os.str();
}

ModelSpec normalized(const ModelSpec& spec) {
  ModelSpec s = spec;
  if (s.name == "neuron_inverter") {
    if (s.variant.empty()) s.variant = "default";
    MRMF_CHECK_KIND(Config, s.variant == "default", "unknown neuron_inverter variant '", s.variant,
                    "': it has one, 'default'");
    MRMF_CHECK_KIND(Config, s.sample_shape.ndim() == 2, "neuron_inverter expects a sample shape (C, T), got ",
                    s.sample_shape.str());
  } else if (s.name == "cosmoflow") {
    if (s.variant.empty()) s.variant = "mrmf";
    const auto& vs = cosmoflow_variants();
    MRMF_CHECK_KIND(Config, std::find(vs.begin(), vs.end(), s.variant) != vs.end(), "unknown cosmoflow variant '",
                    s.variant, "': expected mrmf, lbann2019 or mlperf");
    MRMF_CHECK_KIND(Config, s.sample_shape.ndim() == 4, "cosmoflow expects a sample shape (C, D, H, W), got ",
                    s.sample_shape.str());
  } else {
    MRMF_THROW(Config, "unknown model '", s.name, "': expected neuron_inverter or cosmoflow");
  }
  return s;
}

NeuronInverterConfig neuron_inverter_config(const ModelSpec& spec) {
  const ModelSpec s = normalized(spec);
  MRMF_CHECK_KIND(Config, s.name == "neuron_inverter", "model '", s.name, "' is not neuron_inverter");
  NeuronInverterConfig c;
  Options o(s);
  c.channels = s.sample_shape[0];
  c.time_bins = s.sample_shape[1];
  c.conv_channels = o.get_list("conv_channels", c.conv_channels);
  c.kernel = o.get_int("kernel", c.kernel);
  c.pool = o.get_int("pool", c.pool);
  c.fc_widths = o.get_list("fc", c.fc_widths);
  c.outputs = o.get_int("outputs", c.outputs);
  c.dropout = static_cast<float>(o.get_real("dropout", c.dropout));
  c.flat_bn = o.get_bool("flat_bn", c.flat_bn);
  c.input_layout = parse_input_layout(o.get_str("input_layout", input_layout_name(c.input_layout)));
  c.fused = o.get_bool("fused", c.fused);
  o.check_all_used();
  return c;
}

CosmoFlowConfig cosmoflow_config(const ModelSpec& spec) {
  const ModelSpec s = normalized(spec);
  MRMF_CHECK_KIND(Config, s.name == "cosmoflow", "model '", s.name, "' is not cosmoflow");
  CosmoFlowConfig c;
  Options o(s);
  c.variant = s.variant;
  c.channels = s.sample_shape[0];
  c.spatial = {s.sample_shape[1], s.sample_shape[2], s.sample_shape[3]};
  c.outputs = o.get_int("outputs", c.outputs);
  c.dropout = static_cast<float>(o.get_real("dropout", c.dropout));
  // A negative value is the model's sentinel for "the variant's default":
  // given, -5 silently meant that.
  MRMF_CHECK_KIND(Config, !s.options.count("dropout") || c.dropout >= 0, "model option 'dropout': ", c.dropout,
                  " must be >= 0 (leave it out for the variant's default)");
  c.bn_eps = o.get_real("bn_eps", c.bn_eps);
  c.bn_momentum = o.get_real("bn_momentum", c.bn_momentum);
  c.fused = o.get_bool("fused", c.fused);
  o.check_all_used();
  return c;
}

std::unique_ptr<Model> build_model(const ModelSpec& spec) {
  const ModelSpec s = normalized(spec);
  if (s.name == "neuron_inverter") return build_neuron_inverter(neuron_inverter_config(s));
  return build_cosmoflow(cosmoflow_config(s));
}

InitScheme default_init_scheme(const ModelSpec& spec) {
  return normalized(spec).name == "cosmoflow" ? InitScheme::GlorotUniform : InitScheme::PyTorchDefault;
}

// ------------------------------------------------------------------ describe
namespace {
struct Row {
  std::string path, type, shape, group;
  int64_t params = 0;
};

void walk(Sequential& seq, const std::string& prefix, Shape& shape, const ParamStore& store,
          std::vector<Row>& rows) {
  for (size_t i = 0; i < seq.size(); ++i) {
    Module& m = seq.child(i);
    const std::string path = prefix + m.name();
    if (auto* sub = dynamic_cast<Sequential*>(&m)) {
      walk(*sub, path + ".", shape, store, rows);
      continue;
    }
    shape = m.output_shape(shape);
    Row r{path, m.type(), shape.str(), group_name(seq.child_group(i)), 0};
    for (const auto& p : store.entries())
      if (p.kind == ParamKind::Param && p.name.compare(0, path.size() + 1, path + ".") == 0) r.params += p.numel();
    rows.push_back(r);
  }
}
}  // namespace

std::string describe(Model& model) {
  std::vector<int64_t> d{1};
  for (int i = 0; i < model.sample_shape().ndim(); ++i) d.push_back(model.sample_shape()[i]);
  Shape shape(d);
  std::vector<Row> rows;
  // Parameter counts need the registered store; an unbuilt model shows zeros.
  walk(model.net(), "", shape, model.params(), rows);

  size_t wp = 5, wt = 4, ws = 12;
  for (const auto& r : rows) {
    wp = std::max(wp, r.path.size());
    wt = std::max(wt, r.type.size());
    ws = std::max(ws, r.shape.size());
  }
  std::ostringstream os;
  os << "model " << model.name() << ", input (batch 1) " << Shape(d).str() << "\n";
  os << std::left << std::setw(static_cast<int>(wp)) << "layer" << "  " << std::setw(static_cast<int>(wt)) << "type"
     << "  " << std::setw(static_cast<int>(ws)) << "output shape" << "  " << std::right << std::setw(10) << "params"
     << "  group\n";
  for (const auto& r : rows)
    os << std::left << std::setw(static_cast<int>(wp)) << r.path << "  " << std::setw(static_cast<int>(wt)) << r.type
       << "  " << std::setw(static_cast<int>(ws)) << r.shape << "  " << std::right << std::setw(10) << r.params
       << "  " << r.group << "\n";
  int64_t bottom = 0, top = 0, buffers = 0;
  for (const auto& p : model.params().entries()) {
    if (p.kind == ParamKind::Buffer)
      buffers += p.numel();
    else
      (p.group == ParamGroup::Bottom ? bottom : top) += p.numel();
  }
  os << "parameters: bottom " << bottom << ", top " << top << ", total " << bottom + top << " (buffers " << buffers
     << " elements)";
  if (!model.built()) os << " [model not built]";
  os << "\n";
  return os.str();
}

// ------------------------------------------------------------------ text forms
std::string shape_to_list(const Shape& s) {
  std::string out;
  for (int i = 0; i < s.ndim(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out;
}

Shape shape_from_list(const std::string& s) {
  std::vector<int64_t> d;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      const long long v = std::stoll(item, &pos);
      MRMF_CHECK_KIND(Config, pos == item.size() && v > 0, "");
      d.push_back(v);
    } catch (...) {
      MRMF_THROW(Config, "invalid shape '", s, "': expected positive integers separated by commas");
    }
  }
  MRMF_CHECK_KIND(Config, !d.empty() && d.size() <= static_cast<size_t>(kMaxDims), "invalid shape '", s, "'");
  return Shape(d);
}

std::string encode_options(const std::map<std::string, std::string>& o) {
  std::string out;
  for (const auto& kv : o) {
    MRMF_CHECK_KIND(Config, kv.first.find_first_of("=\n") == std::string::npos && kv.second.find('\n') == std::string::npos,
                    "model option '", kv.first, "' cannot be stored (contains '=' or a newline)");
    out += kv.first + "=" + kv.second + "\n";
  }
  return out;
}

std::map<std::string, std::string> decode_options(const std::string& s) {
  std::map<std::string, std::string> o;
  std::stringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    MRMF_CHECK_KIND(Data, eq != std::string::npos, "invalid model option line '", line, "'");
    o[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return o;
}

}  // namespace mrmf
