// The global heap check (data/h5_global_heap_check.h) on valid files it
// must not refuse: a string never written in a file with a userblock
// (libhdf5 1.10's H5Dget_offset then wraps round to a small offset), and a
// string reached through an external link into a file with a userblock
// (its offsets and bytes are the target file's). Damaged heaps are in
// test_cli_damaged_data.cpp.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <string>

#include "data/h5file.h"
#include "support/temp_dir.h"

using namespace mrmf;

namespace {

// A new file with a 512-byte userblock (so that file offsets and HDF5
// addresses differ).
hid_t create_with_userblock(const std::string& path) {
  const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  REQUIRE(H5Pset_userblock(fcpl, 512) >= 0);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  REQUIRE(f >= 0);
  return f;
}

// A scalar variable-length UTF-8 string dataset `name`, written when `text` is given.
void add_string(hid_t f, const char* name, const char* text) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t d = H5Dcreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(d >= 0);
  if (text) REQUIRE(H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) >= 0);
  H5Dclose(d);
  H5Sclose(space);
  H5Tclose(type);
}

}  // namespace

TEST_CASE("global heap check: valid strings in files with a userblock or behind an external link pass", "[h5][data]") {
  test::TempDir dir;
  SECTION("a string never written, in a file with a userblock") {
    const std::string path = dir.file("unwritten.h5");
    const hid_t f = create_with_userblock(path);
    add_string(f, "meta.JSON", nullptr);
    H5Fclose(f);
    CHECK(data::H5File::open_read(path).read_string("meta.JSON").empty());
  }
  SECTION("a string behind an external link, in a file with a userblock") {
    const std::string target = dir.file("target.h5"), link = dir.file("link.h5");
    const std::string text(5000, 'x');  // past the first collection's minimum size
    hid_t f = create_with_userblock(target);
    add_string(f, "meta.JSON", text.c_str());
    H5Fclose(f);
    f = H5Fcreate(link.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0);
    add_string(f, "other", "a string of this file's own");
    REQUIRE(H5Lcreate_external(target.c_str(), "meta.JSON", f, "meta.JSON", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    CHECK(data::H5File::open_read(target).read_string("meta.JSON") == text);
    CHECK(data::H5File::open_read(link).read_string("meta.JSON") == text);
    CHECK(data::H5File::open_read(link).read_string("other") == "a string of this file's own");
  }
}
