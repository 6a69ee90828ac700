// Reading a dataset of a file damaged on purpose: the tests of the checks
// that run before libhdf5 trusts its metadata (data/h5_symbol_table_check.h,
// data/h5_chunk_index_check.h).
#pragma once

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/h5file.h"

namespace mrmf::testing {

// Opening `path` and reading `dataset` is a Data error whose message
// holds every one of `phrases`.
inline void require_read_refused(const std::string& path, const std::string& dataset,
                                 const std::vector<std::string>& phrases) {
  try {
    data::H5File::open_read(path).read(dataset, DType::F32);
    FAIL("the damaged file was read: " << path);
  } catch (const Error& e) {
    INFO(e.what());
    CHECK(e.kind() == ErrorKind::Data);
    for (const std::string& p : phrases) CHECK_THAT(e.what(), Catch::Contains(p));
  }
}

}  // namespace mrmf::testing
