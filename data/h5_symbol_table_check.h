// Files in HDF5's original format -- superblock version 0 or 1, what h5py
// and libhdf5 write by default and what the applications' published data
// sets use -- keep their groups in "symbol tables": a version-1 B-tree of
// symbol-table nodes whose names lie in a local heap. None of it carries a
// checksum, and libhdf5 1.10 follows the addresses it finds there without
// checking them: session 61's fuzzing of a Neuron Inverter file made
// `mrmf downsample` die of SIGSEGV inside libhdf5 when the root group's
// B-tree or local-heap address, a B-tree child's address or the local
// heap's data address was damaged (session 59 found 21 such crashes). The
// check below walks the groups from the superblock, from the file's bytes,
// before libhdf5 opens the file, so that such damage is an error naming
// the file and the structure instead of a crash.
#pragma once

#include <string>
#include <unordered_set>

namespace mrmf::data {

// Walks every group reachable from the root of the HDF5 file at `path`
// (the superblock, the object headers of groups and of what they hold
// with their continuation blocks, each group's B-tree, symbol-table nodes
// and local heap; a new-style group's hard links kept in its object
// header -- what libhdf5 makes of a group that tracks creation order or
// is given an external link or a UTF-8 name, and of every group in HDF5
// 1.8's format), checking that each address and count stays inside the
// file and its structure, as the format requires. Throws a Data error
// naming the file, the structure and its file offset when one does not.
// Superblocks of versions 2 and 3 (HDF5 1.8's and 1.10's formats) and
// version-2 object headers carry checksums libhdf5 verifies; the walk
// reads them for what they lead to that carries none (chunk indexes of
// layout version 3, old-style groups) and checks only that they stay
// inside the file. Returns without a verdict for what it does not know:
// a superblock past version 3, addresses or lengths other than 8 bytes, a
// new-style group's links past 8 (kept in a fractal heap, checksummed),
// and what lies past a bound on the work (4096 objects, 256 MiB read).
// Also the chunk index of each chunked dataset it meets
// (data/h5_chunk_index_check.h; 64 MiB read for them all); returns the
// names of those it found sound ("g/x", no leading '/'), whose reads then
// need no check of their chunks' filter masks (H5File::read_rows_into).
std::unordered_set<std::string> check_symbol_table_structure(const std::string& path);

}  // namespace mrmf::data
