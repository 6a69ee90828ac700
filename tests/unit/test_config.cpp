#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "fusion/config.h"
#include "support/temp_dir.h"

using namespace mrmf;

TEST_CASE("config: defaults, YAML values and --set overrides", "[config]") {
  RunConfig d = parse_run_config("", {});
  CHECK(d.train.batch_size == 512);
  CHECK(d.optimizer.name == "adam");
  // GPU convolution defaults: PyTorch's (TF32, autotuning), 4 GiB workspace cap.
  CHECK(d.runtime.allow_tf32);
  CHECK(d.runtime.cudnn_benchmark);
  CHECK(d.runtime.cudnn_workspace_mb == 4096);
  RunConfig strict = parse_run_config("runtime: {allow_tf32: false}", {"runtime.cudnn_workspace_mb=512"});
  CHECK_FALSE(strict.runtime.allow_tf32);
  CHECK(strict.runtime.cudnn_workspace_mb == 512);
  RunConfig c = parse_run_config(R"(
model: {name: cosmoflow, variant: mrmf, options: {dropout: 0.05}}
data: {format: cosmoflow, path: cosmo/, reduce: [2, 2, 2]}
train: {batch_size: 8, seed: 7}
schedule: {type: piecewise, boundaries: [1600, 2400], values: [2e-3, 2e-4, 2e-5]}
)",
                                 {"train.batch_size=16", "stop.max_epochs=3", "data.reduce=[1, 2, 2]"});
  CHECK(c.model.name == "cosmoflow");
  CHECK(c.model.options.at("dropout") == "0.05");
  CHECK(c.train.batch_size == 16);
  CHECK(c.train.seed == 7);
  CHECK(c.stop.max_epochs == 3);
  CHECK(c.data.reduce == std::vector<int64_t>{1, 2, 2});
  CHECK(c.schedule.values.size() == 3);
  // The effective text round-trips to the same configuration (and hash).
  RunConfig again = parse_run_config(c.text, {});
  CHECK(again.text == c.text);
  CHECK(again.hash() == c.hash());
  CHECK(parse_run_config(c.text, {"train.seed=8"}).hash() != c.hash());
}

TEST_CASE("config: bad input names the key before any compute", "[config]") {
  auto fails_with = [](const std::string& yaml, std::vector<std::string> sets, const std::string& needle) {
    try {
      parse_run_config(yaml, sets);
      FAIL("no error for " << yaml);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
      CHECK_THAT(std::string(e.what()), Catch::Contains(needle));
    }
  };
  fails_with("train: {epoch: 5}", {}, "unknown config key 'train.epoch'");
  // A key with no value is a value forgotten: named, with its default.
  fails_with("train:\n  batch_size:\n", {},
             "config key 'train.batch_size' has no value; write one, or leave the key "
             "out for its default (512)");
  fails_with("data: {reduce: }", {}, "'data.reduce' has no value");
  CHECK(parse_run_config("train:\n", {}).train.batch_size == 512);  // an empty section keeps its defaults
  // Leading zeros: octal to yaml-cpp (016 -> 14), decimal to YAML 1.2; refused.
  fails_with("train: {batch_size: 016}", {}, "'016' has a leading zero");
  fails_with("", {"stop.max_epochs=010"}, "'010' has a leading zero");
  fails_with("", {"train.checkpoint_every=-07"}, "leading zero");
  CHECK(parse_run_config("train: {batch_size: 0x10, seed: 0}", {}).train.batch_size == 16);
  fails_with("train: {batch_sise: 5}", {}, "did you mean 'train.batch_size'");
  fails_with("train: {batch_size: many}", {}, "'train.batch_size': expected an integer, got 'many'");
  fails_with("", {"train.batch_size=0"}, "'train.batch_size': must be at least 1");
  fails_with("", {"data.transform=scale", "data.scale=[1e39, 1]"}, "'data.scale[0]': must be finite in float32");
  fails_with("", {"stop.plateau_threshold=0.01", "stop.plateau_patience=0"}, "'stop.plateau_patience'");
  fails_with("", {"optimizer.name=lbfgs"}, "'lbfgs' is not one of adam, adamw, sgd");
  fails_with("", {"train.deterministic=maybe"}, "'train.deterministic': expected a boolean");
  fails_with("", {"runtime.cudnn_workspace_mb=-1"}, "'runtime.cudnn_workspace_mb': must be 0 to 2^30, got -1");
  fails_with("", {"runtime.allow_tf32=perhaps"}, "'runtime.allow_tf32': expected a boolean");
  fails_with("", {"train.seed=-1"}, "'train.seed': expected a non-negative integer");
  fails_with("", {"schedule.type=piecewise", "schedule.boundaries=[10]", "schedule.values=[1e-3]"},
             "one more value than boundaries");
  fails_with("", {"data.reduce=[2, 0]"}, "'data.reduce[1]'");
  fails_with("", {"data.reduce_on=gpu"}, "'data.reduce_on': 'gpu' is not one of auto, host, device");
  fails_with("train: [1, 2", {}, "invalid YAML");
  fails_with("train: 5", {}, "config key 'train' is a section: expected a map of its keys");
  fails_with("train: [1, 2]", {}, "got a list");
  CHECK(parse_run_config("train:\n", {}).train.batch_size == parse_run_config("", {}).train.batch_size);
  fails_with("", {"nonsense"}, "expected key=value");
  fails_with("train: {batch_size: 4}", {"train.batch_size.x=1"}, "not a section");
  fails_with("", {"train.batch_size.x=1"}, "unknown config key 'train.batch_size.x'");
  // Impossible values of every bounded key.
  fails_with("", {"optimizer.momentum=5"}, "'optimizer.momentum': must be in [0, 1), got 5");
  fails_with("", {"optimizer.lr=.inf"}, "'optimizer.lr': must be positive and finite");
  fails_with("", {"optimizer.lr=.nan"}, "'optimizer.lr'");
  fails_with("", {"schedule.type=piecewise", "schedule.boundaries=[10]", "schedule.values=[-1e-3, 1e-4]"},
             "'schedule.values[0]': learning rates must be positive");
  fails_with("", {"schedule.type=piecewise", "schedule.boundaries=[5, 2]", "schedule.values=[1, 2, 3]"},
             "'schedule.boundaries': steps must be >= 1 and increasing, got 2 at position 1");
  fails_with("", {"schedule.plateau_cooldown=-3"}, "'schedule.plateau_cooldown': must be >= 0, got -3");
  fails_with("", {"schedule.warmup_steps=-1"}, "'schedule.warmup_steps': must be >= 0, got -1");
  fails_with(
      "", {"schedule.warmup_steps=10", "schedule.warmup_epochs=2"},
      "'schedule.warmup_epochs' (2) and 'schedule.warmup_steps' (10): set one warmup, not both (the other to 0)");
  fails_with("", {"schedule.plateau_min_lr=-1"}, "'schedule.plateau_min_lr'");
  fails_with("", {"schedule.power=0"}, "'schedule.power'");
  fails_with("", {"data.max_train_samples=-5"}, "'data.max_train_samples': must be >= 0");
  fails_with("", {"data.cache_max_mb=-1"}, "'data.cache_max_mb': must be 0 (automatic) to 2^30, got -1");
  fails_with("", {"data.io_threads=0"}, "'data.io_threads': must be 1 to 8, got 0");
  fails_with("", {"data.io_threads=9"}, "'data.io_threads': must be 1 to 8, got 9");
  fails_with("", {"train.max_steps_per_epoch=-1"}, "'train.max_steps_per_epoch': must be >= 0");
  fails_with("", {"stop.target_val_loss=.inf"}, "'stop.target_val_loss': must be finite");
  fails_with("", {"data.scale=[1, .nan]"}, "'data.scale[1]': must be finite");
  // The layout is said once: both keys, disagreeing, is an error naming both.
  fails_with("", {"data.layout=reinterpret", "model.options.input_layout=transpose"},
             "'data.layout' (reinterpret) and 'model.options.input_layout' (transpose) disagree");
  fails_with("", {"model.options.input_layout=sideways"}, "'model.options.input_layout': 'sideways'");
  // A key given twice in a file: yaml-cpp would keep the first silently.
  fails_with("train: {batch_size: 4}\ntrain: {batch_size: 8}\n", {}, "key 'train' is given twice");
  fails_with("train: {batch_size: 4, batch_size: 8}\n", {}, "key 'train.batch_size' is given twice");
  // A --set key ending in '.' (the empty last part used to be dropped).
  fails_with("", {"train.batch_size.=3"}, "the key ends with '.'");
  fails_with("", {"train.=3"}, "the key ends with '.'");
  // A YAML alias that refers to its own anchor: an error, not a stack overflow.
  fails_with("a: &x [*x]\n", {}, "nested more than 32 levels deep");
  // ... nor aliases of aliases, 10^9 values from nine lines (it walked them for hours).
  {
    std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int k = 1; k < 9; ++k) {
      bomb += "l" + std::to_string(k) + ": &l" + std::to_string(k) + " [";
      for (int j = 0; j < 10; ++j) bomb += (j ? ", *l" : "*l") + std::to_string(k - 1);
      bomb += "]\n";
    }
    fails_with(bomb, {}, "more than 100000 values once its YAML aliases are expanded");
  }
  fails_with("", {"runtime.threads=100000"}, "'runtime.threads': must be 0 (all cores) to 4096");
  fails_with("", {"optimizer.weight_decay=.inf"}, "'optimizer.weight_decay': must be >= 0 and finite");
  fails_with("", {"optimizer.eps=.inf"}, "'optimizer.eps': must be positive and finite");
  // From a review (session 51): an override's value is checked as a file is
  // (a looping alias crashed, a key given twice kept the last) ...
  fails_with("", {"train=&a {x: *a}"}, "nested more than 32 levels deep");
  fails_with("", {"train={batch_size: 4, batch_size: 8}"}, "key 'train.batch_size' is given twice");
  // ... a list or a map as a key is named (it was yaml-cpp's "bad conversion", exit 1) ...
  fails_with("? [a, b]\n: 1\n", {}, "keys are names");
  fails_with("train: {[a, b]: 1}\n", {}, "under 'train' is a list or a map");
  // ... a second YAML document is not silently dropped ...
  fails_with("train: {batch_size: 8}\n---\nstop: {max_epochs: 3}\n", {}, "2 YAML documents");
  // A stray ',' after a value made yaml-cpp 0.7's LoadAll loop for ever,
  // allocating, until the process was killed (session 57) ...
  fails_with("", {"data.reduce=[2,2,2],"}, "cannot parse the value: unexpected ','");
  fails_with("", {"train.seed=,"}, "unexpected ','");
  fails_with(",", {}, "invalid YAML: unexpected ','");
  fails_with("train: {batch_size: 8}\n---\nstop: {}\n---\nx: 1\n---\ny: 2\n", {}, "3 or more YAML documents");
  // ... and per-channel factors without the transform that applies them
  // were silently ignored; a 0 factor erased its channel.
  // (A user's configuration only: one stored in an older checkpoint still parses.)
  CHECK_THROWS_WITH(check_user_config(parse_run_config("", {"data.scale=[1, 2]"})),
                    Catch::Contains("data.transform is 'none', so they would be ignored"));
  CHECK(parse_run_config("", {"data.scale=[1, 2]"}).data.scale.size() == 2);
  fails_with("", {"data.transform=scale", "data.scale=[1, 0]"}, "'data.scale[1]': 0 erases channel 1");
  // ... and infinite or oversized values are refused.
  fails_with("", {"stop.plateau_threshold=.inf", "stop.plateau_patience=1"},
             "'stop.plateau_threshold': must be finite and >= 0");
  fails_with("", {"data.prefetch=4294967296"}, "'data.prefetch': must be 1 to 64");
  fails_with("", {"data.cache_max_mb=17592186044416"}, "'data.cache_max_mb': must be 0 (automatic) to 2^30");
  fails_with("", {"runtime.cudnn_workspace_mb=17592186044416"}, "'runtime.cudnn_workspace_mb': must be 0 to 2^30");
  // Found by fuzzing (session 59), each accepted or reported in yaml-cpp's
  // words before: a misspelt key holding an empty map was dropped unseen ...
  fails_with("train: {bacth_size: {}}", {}, "unknown config key 'train.bacth_size'");
  fails_with("bogus: {}", {}, "unknown config key 'bogus'");
  // An unknown key a --set wrote is the --set's, not the file's.
  fails_with("train: {batch_size: 8}", {"bogus.x=1"}, "--set 'bogus.x=1': unknown config key 'bogus.x'");
  fails_with("bogus: 1", {"train.seed=2"}, "<string>: unknown config key 'bogus'");
  CHECK(parse_run_config("train: {}", {}).train.batch_size == 512);  // an empty section, as 'train:' is
  // ... values the optimizer's float32 makes 0 (an lr that trained nothing,
  // an eps that divided by zero) ...
  fails_with("optimizer: {lr: 1.0e-46}", {}, "'optimizer.lr': 1e-46 is below float32's smallest normal number");
  fails_with("", {"optimizer.eps=1e-320"}, "'optimizer.eps': 9.99989e-321 is below float32's smallest normal");
  CHECK(parse_run_config("optimizer: {eps: 1.0e-30}", {}).optimizer.eps == 1.0e-30);
  // (A min_epochs above max_epochs stays legal: a run cut short on purpose
  // and resumed with more epochs; check_user_config gives a notice.)
  CHECK(parse_run_config("stop: {min_epochs: 5, max_epochs: 1}", {}).stop.min_epochs == 5);
  // ... and values nested past yaml-cpp's depth limit ("bad file").
  fails_with(std::string(600, '[') + std::string(600, ']'), {}, "levels deep, past the YAML reader's limit");
  fails_with("", {"optimizer.lr=" + std::string(600, '[') + std::string(600, ']')}, "levels deep");
}

TEST_CASE("config: a configuration file is a file or a pipe with a writer", "[config]") {
  // A FIFO without a writer blocked the read for ever (a hang SIGTERM did
  // not end); a link loop was a bare file-system error.
  test::TempDir tmp("mrmf_config_files");
  const std::string fifo = (tmp.dir / "fifo.yaml").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const auto fails = [](const std::string& path, const std::string& needle) {
    try {
      load_run_config(path, {});
      FAIL("no error for " << path);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::Config);
      CHECK_THAT(std::string(e.what()), Catch::Contains(needle));
    }
  };
  fails(fifo, "cannot read config file '" + fifo + "': a FIFO that no process wrote to within 5 s");
  // A pipe with a writer (`--config <(...)`) and a character device are read.
  std::thread writer([&] { std::ofstream(fifo) << "train: {batch_size: 24}\n"; });
  CHECK(load_run_config(fifo, {}).train.batch_size == 24);
  writer.join();
  CHECK(load_run_config("/dev/null", {}).train.batch_size == 512);
  std::filesystem::create_symlink("b.yaml", tmp.dir / "a.yaml");
  std::filesystem::create_symlink("a.yaml", tmp.dir / "b.yaml");
  fails((tmp.dir / "a.yaml").string(), "Too many levels of symbolic links");
  fails((tmp.dir / "none.yaml").string(), "none.yaml': no such file");
  fails(tmp.dir.string(), "it is a folder, expected a YAML file");
  { std::ofstream((tmp.dir / "ok.yaml").string()) << "train: {batch_size: 8}\n"; }
  std::filesystem::create_symlink("ok.yaml", tmp.dir / "link.yaml");  // a link to a file is fine
  CHECK(load_run_config((tmp.dir / "link.yaml").string(), {}).train.batch_size == 8);
}

TEST_CASE("config: train.epochs is stop.max_epochs, and the Neuron Inverter layout has one source", "[config]") {
  CHECK(parse_run_config("train: {epochs: 5}", {}).stop.max_epochs == 5);
  CHECK(parse_run_config("", {"train.epochs=7"}).stop.max_epochs == 7);
  // --set through the alias overrides the file's canonical key (and vice versa).
  CHECK(parse_run_config("stop: {max_epochs: 2}", {"train.epochs=7"}).stop.max_epochs == 7);
  CHECK(parse_run_config("train: {epochs: 2}", {"stop.max_epochs=7"}).stop.max_epochs == 7);
  // Both spellings in one file: ambiguous, refused.
  CHECK_THROWS_WITH(parse_run_config("train: {epochs: 2}\nstop: {max_epochs: 3}", {}),
                    Catch::Contains("'stop.max_epochs' and 'train.epochs' are the same setting") ||
                        Catch::Contains("'train.epochs' and 'stop.max_epochs' are the same setting"));
  // The effective text names the canonical key only, so it round-trips.
  const RunConfig a = parse_run_config("", {"train.epochs=7"});
  CHECK(a.text == parse_run_config("", {"stop.max_epochs=7"}).text);

  // Default: transpose. The model option alone decides the loader's layout
  // (which is what actually reorders the data), and vice versa.
  CHECK(parse_run_config("", {}).data.layout == "transpose");
  const RunConfig v = parse_run_config("", {"model.options.input_layout=reinterpret_view"});
  CHECK(v.data.layout == "reinterpret");
  CHECK(v.model.options.at("input_layout") == "view");
  CHECK(parse_run_config("", {"model.options.input_layout=transpose"}).data.layout == "transpose");
  const RunConfig d = parse_run_config("", {"data.layout=reinterpret"});
  CHECK(d.data.layout == "reinterpret");
  CHECK(parse_run_config("", {"data.layout=reinterpret", "model.options.input_layout=view"}).data.layout ==
        "reinterpret");
  CHECK(parse_run_config(v.text, {}).text == v.text);
}

TEST_CASE("config: keys the chosen optimizer or schedule does not read are listed", "[config]") {
  // Accepted (an experiment's base may carry both optimizers' keys), but
  // said: `optimizer.momentum` under Adam, or a schedule's keys under
  // another schedule, used to change nothing without a word.
  CHECK(unused_settings(parse_run_config("", {})).empty());
  CHECK(unused_settings(parse_run_config("optimizer: {name: adam, beta1: 0.8, lr: 1e-3}", {})).empty());
  const RunConfig a = parse_run_config("optimizer: {name: adam, momentum: 0.5}",
                                       {"schedule.decay_steps=100", "schedule.plateau_factor=0.5"});
  CHECK(unused_settings(a) == std::vector<std::string>{"optimizer.momentum: adam does not use it",
                                                       "schedule.decay_steps: schedule constant does not use it",
                                                       "schedule.plateau_factor: schedule constant does not use it"});
  const RunConfig s = parse_run_config(
      "optimizer: {name: sgd, momentum: 0.5, eps: 1e-6}\n"
      "schedule: {type: cosine, decay_steps: 10, power: 2}",
      {});
  CHECK(unused_settings(s) == std::vector<std::string>{"optimizer.eps: sgd does not use it",
                                                       "schedule.power: schedule cosine does not use it"});
  CHECK(unused_settings(parse_run_config("schedule: {type: polynomial, decay_steps: 10, power: 2}", {})).empty());
  // The effective text names every key: only what was given counts.
  CHECK(unused_settings(parse_run_config("", {"optimizer.name=sgd"})).empty());
}
