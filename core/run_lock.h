// One command a run folder at a time. `mrmf train` and `mrmf experiment`
// hold an exclusive flock(2) on <out>/.mrmf.lock while they write there, so
// that a second command into the same folder -- a resubmitted job, a
// --resume started while the first run still goes on -- is refused instead
// of interleaving its metrics and checkpoints with the first's. The kernel
// drops the lock when the process ends, however it ends, so a killed run
// leaves no stale lock. Rank 0 takes it and every rank learns the answer,
// so all ranks stop or none does. A file system without flock (some NFS
// mounts) gets a notice and no lock.
#pragma once

#include <string>

namespace mrmf {

class Communicator;

class RunFolderLock {
 public:
  // Creates `dir` if needed. Throws a Usage error (on every rank) naming the
  // process that holds the folder.
  RunFolderLock(const std::string& dir, const Communicator& world);
  // Releases the lock; a folder this lock created and nothing else wrote
  // into (a command refused before it wrote) is removed again.
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

  // Removes the partial files (<name>.tmp.<pid>.<n>, data/h5file.h's
  // AtomicOutput) an interrupted process left below the folder: with the
  // lock held no other command is writing them. Returns how many.
  int remove_partial_files() const;

 private:
  std::string dir_;
  int fd_ = -1;
  bool created_dir_ = false;
};

}  // namespace mrmf
