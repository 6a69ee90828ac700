// docs/configuration.md against the code: every run key has a row whose
// default is the one the program uses, every experiment key and every model
// option has a row, and no row names a key that does not exist -- so the
// reference cannot drift from the schema unnoticed.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "fusion/config.h"
#include "fusion/experiment_config.h"
#include "models/registry.h"
#include "support/source_tree.h"

using namespace mrmf;

namespace {

struct Row {
  std::string type, value;  // value: the default column without its backticks
};

// The rows of the document's tables, by key, under the `###`/`####`
// heading they appear in ("data", "cosmoflow", ...): `| `key` | type |
// `default` | meaning |`.
std::map<std::string, std::map<std::string, Row>> table_rows(const std::string& doc) {
  std::map<std::string, std::map<std::string, Row>> out;
  std::istringstream in(doc);
  std::string heading;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("###", 0) == 0) {
      heading = line.substr(line.find_first_not_of("# "));
      continue;
    }
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream cols(line.substr(1));
    for (std::string c; std::getline(cols, c, '|');) {
      const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
      cells.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
    }
    INFO(line);
    REQUIRE(cells.size() >= 4);
    auto unquote = [](const std::string& c) {
      return c.size() >= 2 && c.front() == '`' && c.back() == '`' ? c.substr(1, c.size() - 2) : c;
    };
    const std::string key = unquote(cells[0]);
    CHECK(out[heading].count(key) == 0);  // a key given twice
    out[heading][key] = Row{cells[1], unquote(cells[2])};
  }
  return out;
}

// The reference's text; empty (the case skipped, with a warning) for a test
// binary outside the source tree, as the Slurm checks do.
std::string reference_doc() {
  const auto root = testing::source_root();
  if (root.empty()) {
    WARN("the source tree (configs/, docs/) was not found from the test binary or the working directory");
    return "";
  }
  const std::string doc = testing::read_text(root / "docs" / "configuration.md");
  REQUIRE(!doc.empty());  // in the tree, the reference must be there
  return doc;
}

// A default as the effective configuration writes it: a scalar's text ("" for
// an empty string), a list as [a, b].
std::string written(const YAML::Node& n) {
  if (n.IsSequence()) {
    std::string s = "[";
    for (size_t i = 0; i < n.size(); ++i) s += (i ? ", " : "") + n[i].Scalar();
    return s + "]";
  }
  return n.Scalar().empty() ? "\"\"" : n.Scalar();
}

// Whether the reference's default is the program's: the same text, or the
// same number (the emitter writes 0.9 as 0.90000000000000002).
bool same_value(const std::string& doc, const std::string& code) {
  if (doc == code) return true;
  auto number = [](const std::string& s, double& v) {
    try {
      size_t pos = 0;
      v = std::stod(s, &pos);
      return pos == s.size();
    } catch (...) {
      return false;
    }
  };
  double a = 0, b = 0;
  return number(doc, a) && number(code, b) && a == b;
}

// The options a model reads, as its error for an unknown one lists them.
std::set<std::string> model_options(const std::string& name, const Shape& sample) {
  ModelSpec spec;
  spec.name = name;
  spec.sample_shape = sample;
  spec.options["zz_not_an_option"] = "1";
  std::string message;
  try {
    if (name == "cosmoflow")
      cosmoflow_config(spec);
    else
      neuron_inverter_config(spec);
  } catch (const Error& e) {
    message = e.what();
  }
  INFO(message);
  const size_t at = message.find("(known: ");
  REQUIRE(at != std::string::npos);
  std::set<std::string> known;
  std::istringstream list(message.substr(at + 8, message.find(')', at) - at - 8));
  for (std::string k; std::getline(list, k, ',');) known.insert(k.substr(k.find_first_not_of(' ')));
  return known;
}

}  // namespace

TEST_CASE("config reference: every run key has a row with the program's default", "[config][docs]") {
  const std::string doc = reference_doc();
  if (doc.empty()) return;
  const auto rows = table_rows(doc);
  const YAML::Node defaults = YAML::Load(parse_run_config("", {}).text);
  std::set<std::string> documented;
  for (const std::string& key : run_config_keys()) {
    const std::string section = key.substr(0, key.find('.'));
    INFO("key " << key << " under the heading '" << section << "'");
    const auto s = rows.find(section);
    REQUIRE(s != rows.end());
    const auto r = s->second.find(key);
    REQUIRE(r != s->second.end());
    documented.insert(key);
    // data.layout's default, auto, is resolved (to transpose) in the
    // effective configuration; the reference gives the key's own default.
    const std::string code =
        key == "data.layout" ? std::string("auto") : written(defaults[section][key.substr(section.size() + 1)]);
    CHECK(same_value(r->second.value, code));
  }
  // No row for a key the schema does not have (a renamed or removed one).
  for (const auto& [heading, table] : rows)
    for (const auto& [key, row] : table)
      if (key.find('.') != std::string::npos && key.rfind("experiment.", 0) != 0) {
        INFO("row " << key << " under '" << heading << "'");
        CHECK(documented.count(key) == 1);
      }
}

TEST_CASE("config reference: every experiment key and no other has a row", "[config][docs]") {
  const std::string doc = reference_doc();
  if (doc.empty()) return;
  const auto rows = table_rows(doc);
  std::set<std::string> in_doc;
  for (const auto& [heading, table] : rows)
    for (const auto& [key, row] : table)
      if (key.rfind("experiment.", 0) == 0) in_doc.insert(key.substr(11));
  CHECK(in_doc == experiment_keys());
}

TEST_CASE("config reference: every model option and no other has a row under its model", "[config][docs]") {
  const std::string doc = reference_doc();
  if (doc.empty()) return;
  const auto rows = table_rows(doc);
  for (const auto& [model, sample] : std::vector<std::pair<std::string, Shape>>{{"neuron_inverter", Shape{3, 1600}},
                                                                                {"cosmoflow", Shape{4, 32, 32, 32}}}) {
    INFO("model " << model);
    const auto t = rows.find(model);
    REQUIRE(t != rows.end());
    std::set<std::string> in_doc;
    for (const auto& [key, row] : t->second) in_doc.insert(key);
    std::set<std::string> known = model_options(model, sample);
    if (model == "neuron_inverter") known.insert("input_layout");  // read by the configuration (data.layout)
    CHECK(in_doc == known);
  }
}
