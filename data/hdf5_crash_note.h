// A note on stderr when the process dies of a fault after opening HDF5
// files for reading. libhdf5 1.10 trusts many fields of a file's metadata:
// a damaged address or length in a file without checksums (the originals'
// data files, h5py's default format) can make it read wild memory, smash
// its stack or corrupt the heap -- a SIGSEGV, SIGBUS or SIGABRT, not an
// error it reports. Fuzzing found such bytes in 0.2 % of the offsets of a
// Neuron Inverter file's metadata. The process cannot go on safely after
// that, but the user should learn which file to check: the handler writes
// (once) the last file opened for reading, then lets the fault take its
// course (the previous handler -- MPI's back-trace -- or the default action,
// so the exit status still says which signal it was). The file is the last
// opened, not necessarily the one read when the fault came: the note says
// how to tell. A signal sent by another process gets no note.
#pragma once

#include <string>

namespace mrmf::data {

// Remembers `path` as the HDF5 file most recently opened for reading (an
// empty one: none).
void note_hdf5_file_opened(const std::string& path) noexcept;

// Installs the fault handlers (SIGSEGV, SIGBUS, SIGABRT), once; `rank`
// names the MPI rank in the note. Called after MPI_Init, whose transport
// (UCX) installs handlers of its own: those then run after the note.
void install_hdf5_crash_note(int rank) noexcept;

}  // namespace mrmf::data
