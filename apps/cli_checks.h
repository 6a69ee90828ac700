// Checks shared by the subcommands: numeric flags with a lower bound, and
// outputs that must not silently replace earlier results.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

namespace mrmf {
class Communicator;
}

namespace mrmf::cli {

// "--batch: must be at least 1, got 0" (CLI11's PositiveNumber says "Value 0
// not in range 0 to 1.79e308", which reads as if 0 were allowed).
CLI::Validator at_least(long long lo);
// The same with an upper bound: a value past a flag's type (an int) was
// CLI11's bare "Could not convert".
CLI::Validator between(long long lo, long long hi);

// 0/1, true/false, on/off or yes/no: CLI11 read '' and -1 as false and 1.5 or
// 999999 as true, silently.
CLI::Validator boolean_word();

// "--out: must not be empty" (an empty path otherwise fails late, as a
// rename to "" or a read of "").
CLI::Validator non_empty(const std::string& name = "PATH");

// An unsigned 64-bit number written as one (a seed): CLI11 2.1 reads
// unsigned flags with strtoull, which wraps -1 and clamps too large values,
// silently.
CLI::Validator unsigned64();

// For --out `out`, which is, or will be made in, the folder `place`: the
// nearest existing folder on the way must be a folder the command can write
// in (a file there, /proc, a read-only export are Usage errors naming --out).
// Found otherwise only when the first result is written -- after the data are
// loaded or training started -- as a bare file-system error.
void check_output_place(const std::string& out, const std::filesystem::path& place);

// Refuses (a usage error: exit 2) an output folder that is an existing file,
// or one that already holds any of
// `files` unless `force`, naming them and `remedy`. Every rank looks before
// any rank writes and the answer is agreed (a max over the ranks), so all
// ranks stop or none does.
void refuse_existing_results(const std::string& out, const std::vector<std::string>& files, bool force,
                             const std::string& remedy, const Communicator& world);

// For a run folder `out` whose run writes the files `written` in it (and
// sets an earlier run aside in <out>/previous_run, deleted when the new run
// finishes): refuses, whatever --force says, an input (name, path: a config
// file, a data file, glob or comma list, a data folder) that is one of those
// files or lies in previous_run, and a data folder that is `out` itself or
// one of its split folders (the run's files would be listed as data).
void refuse_inputs_among_results(const std::string& out, const std::vector<std::string>& written,
                                 const std::vector<std::pair<std::string, std::string>>& inputs);

// For an output FILE: refuses one that is the same file as any of `inputs`
// (whatever --force says), and an existing one unless `force`.
void refuse_output_file(const std::string& out, const std::vector<std::string>& inputs, bool force);

// A Config error on every rank, naming both values, unless every rank's
// `mine` equals rank 0's. For flags that decide which collectives a rank
// enters (--resume reads a state the others never wait for: a hang).
void agree_on_all_ranks(const std::string& mine, const std::string& what, const Communicator& world);

}  // namespace mrmf::cli
