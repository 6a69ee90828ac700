// Entry point of every MPI test program (tests/mpi/*.cpp): initializes MPI,
// runs the Catch2 session on every rank, and combines the ranks' results so
// the launcher's exit code fails when any rank failed.
#include "core/communicator.h"
#include "support/catch_session.h"

int main(int argc, char** argv) {
  mrmf::mpi_init(&argc, &argv);
  const int rc = mrmf::test::run_catch_session(argc, argv);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  mrmf::mpi_finalize();
  return worst;
}
